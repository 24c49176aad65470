// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/pagination"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/cinder/pkg/cloudconfig"
	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
	"github.com/kubeprov/external-storage/lib/version"
)

// BinaryName is the binary's name.
const BinaryName = "cinder-provisioner"

// NewCommand returns the cinder-provisioner command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	return cli.NewCommand(BinaryName,
		"Provisions Kubernetes volumes from Cinder as native iSCSI, RBD or Fibre Channel PVs", o)
}

// Run connects to Kubernetes and Cinder and runs the controller until ctx
// ends.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	clients, err := o.NewClients(BinaryName)
	if err != nil {
		return err
	}
	identity := o.Identity
	if identity == "" {
		if identity, err = defaultIdentity(ctx, clients.Kube, o.Provisioner); err != nil {
			return err
		}
	}
	volumeClient, err := cloudconfig.NewBlockStorageClient(ctx, o.cloud, BinaryName+"/"+version.Version)
	if err != nil {
		return err
	}
	logger.Info("Using Cinder", "cinder", o.cloud.String(), "endpoint", volumeClient.Endpoint, "identity", identity, "provisioner", o.Provisioner, "topologyKey", o.TopologyKey)
	if o.InitiatorName == "" {
		logger.Info("No --initiator-name: volumes that Cinder serves over iSCSI will fail to provision")
	}
	p, err := cinder.New(volumeClient, clients.Kube, identity,
		cinder.WithConnector(cinder.Connector{
			Initiator: o.InitiatorName,
			Host:      o.ConnectorHost,
			IP:        o.ConnectorIP,
			WWPNs:     o.WWPNs,
			Platform:  cinder.DefaultPlatform(),
			OSType:    cinder.DefaultOSType,
		}),
		cinder.WithSecretNamespace(o.ChapSecretNamespace),
		cinder.WithStuckCreatingTimeout(o.StuckCreatingTimeout),
		cinder.WithTopologyKey(o.TopologyKey))
	if err != nil {
		return err
	}
	return o.Common.Run(ctx, clients, o.Provisioner, p, cli.RunOptions{
		Ready: map[string]httpendpoint.Check{"cinder": cinderReady(volumeClient)},
	})
}

// defaultIdentity is the provisioner name and the cluster's id, the UID of
// kube-system: stable across restarts and replicas, different per cluster,
// so that clusters sharing a Cinder project never delete each other's
// volumes.
func defaultIdentity(ctx context.Context, kube kubernetes.Interface, provisioner string) (string, error) {
	ns, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("deriving the default --identity from the UID of namespace %s (set --identity to skip this): %w", metav1.NamespaceSystem, err)
	}
	return provisioner + "/" + string(ns.UID), nil
}

// cinderReady checks that Cinder answers a one-volume list.
func cinderReady(c *gophercloud.ServiceClient) httpendpoint.Check {
	return func(r *http.Request) error {
		err := volumes.List(c, volumes.ListOpts{Limit: 1}).EachPage(r.Context(), func(context.Context, pagination.Page) (bool, error) {
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("cinder at %s: %w", c.Endpoint, err)
		}
		return nil
	}
}
