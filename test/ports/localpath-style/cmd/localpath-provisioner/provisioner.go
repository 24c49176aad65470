// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command localpath-provisioner serves node-local volumes the way
// rancher/local-path-provisioner does: one Deployment for the whole cluster,
// a directory per volume on the node the scheduler chose
// (WaitForFirstConsumer), under that node's configured path, and a PV pinned
// to the node. The real one creates the directory with a helper pod on the
// node; this one, run by the tests on a single machine, creates it itself.
//
// It is ported to lib's cli package: the flags, metrics and health endpoint
// of the project's own binaries come with it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
)

// annNode records the volume's node name on the PV: Delete needs it to find
// the node's path, and the affinity holds the hostname, which may differ.
const annNode = "local.example.com/node"

type localPathProvisioner struct {
	nodePaths   map[string]string // node name -> directory holding its volumes
	defaultPath string            // for nodes not in nodePaths; empty: none
}

var (
	_ controller.Provisioner        = (*localPathProvisioner)(nil)
	_ controller.SelectedNodeReader = (*localPathProvisioner)(nil)
)

// ReadsSelectedNode asks the controller for the selected Node object: the
// node affinity needs its hostname label, which need not be its name.
func (p *localPathProvisioner) ReadsSelectedNode() bool { return true }

// pathFor is the directory of node's volumes, "" when node has none.
func (p *localPathProvisioner) pathFor(node string) string {
	if path, ok := p.nodePaths[node]; ok {
		return path
	}
	return p.defaultPath
}

// Provision creates the volume's directory on the selected node, or finds
// the one it created before.
func (p *localPathProvisioner) Provision(_ context.Context, options controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	claim := options.PVC
	for _, mode := range claim.Spec.AccessModes {
		if mode != corev1.ReadWriteOnce && mode != corev1.ReadWriteOncePod {
			return nil, controller.ProvisioningFinished, fmt.Errorf("access mode %s is not supported: a local volume lives on one node; use ReadWriteOnce or ReadWriteOncePod", mode)
		}
	}
	if options.SelectedNode == nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %s: set volumeBindingMode: WaitForFirstConsumer, so that the volume is made on the node of the pod that uses it", options.StorageClass.Name)
	}
	node := options.SelectedNode.Name
	hostname := options.SelectedNode.Labels[corev1.LabelHostname]
	if hostname == "" {
		hostname = node
	}
	root := p.pathFor(node)
	if root == "" {
		// Another node may have a path: let the scheduler choose again.
		return nil, controller.ProvisioningReschedule, fmt.Errorf("node %s has no local path configured (--node-path or --default-path)", node)
	}
	path := filepath.Join(root, strings.Join([]string{options.PVName, claim.Namespace, claim.Name}, "_"))
	if err := os.MkdirAll(path, 0o777); err != nil { //nolint:gosec // any pod's user must write it
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating %s on node %s: %w", path, node, err)
	}
	hostPathType := corev1.HostPathDirectoryOrCreate
	return options.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &hostPathType}},
		// Pods that use the volume must run where its data is.
		NodeAffinity: controller.NodeAffinityForHostname(hostname),
		Annotations:  map[string]string{annNode: node},
	}), controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory, and nothing else: the PV is
// checked against the node's path first, since anyone who can edit PVs can
// point one anywhere.
func (p *localPathProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	node := pv.Annotations[annNode]
	root := p.pathFor(node)
	if pv.Spec.HostPath == nil || root == "" {
		return fmt.Errorf("PV %s has no hostPath on a node with a configured path (node %q): delete its data yourself, then the PV", pv.Name, node)
	}
	rel, err := filepath.Rel(root, pv.Spec.HostPath.Path)
	if err != nil || !filepath.IsLocal(rel) || strings.Contains(rel, string(filepath.Separator)) {
		return fmt.Errorf("refusing to delete %s: it is not a volume directory of node %s (%s); delete it yourself, then the PV", pv.Spec.HostPath.Path, node, root)
	}
	err = os.RemoveAll(filepath.Join(root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// options are the flags: lib/cli's family (with --provisioner) and the node paths.
type options struct {
	cli.Common
	defaultPath string
	nodePaths   map[string]string
}

func (o *options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringToStringVar(&o.nodePaths, "node-path", nil, "Directory of each node's volumes: node=dir,node=dir.")
	fs.StringVar(&o.defaultPath, "default-path", "", "Directory of the volumes of nodes not in --node-path; empty: those nodes get none.")
}

func (o *options) Validate() error {
	if len(o.nodePaths) == 0 && o.defaultPath == "" {
		return errors.New("set --node-path or --default-path: no node could host a volume")
	}
	return o.Common.Validate()
}

func (o *options) Run(ctx context.Context) error {
	clients, err := o.NewClients("localpath-provisioner")
	if err != nil {
		return err
	}
	p := &localPathProvisioner{nodePaths: o.nodePaths, defaultPath: o.defaultPath}
	return o.Common.Run(ctx, clients, o.Provisioner, p, cli.RunOptions{})
}

func main() {
	o := &options{Common: cli.NewCommon("example.com/local-path")}
	if err := cli.NewCommand("localpath-provisioner", "Provisions node-local volumes as directories", o).Execute(); err != nil {
		os.Exit(1)
	}
}
