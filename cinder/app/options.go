// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the cinder-provisioner command: its flags, their checks
// and the wiring of Cinder, Kubernetes and the controller.
package app

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/cinder/pkg/cloudconfig"
	"github.com/kubeprov/external-storage/lib/cli"
)

// Defaults of the flags.
const (
	DefaultProvisioner   = "kubeprov.io/standalone-cinder"
	DefaultConnectorHost = "kubernetes"
)

// Options are the flags of cinder-provisioner.
type Options struct {
	cli.Common
	// CloudConfig is the INI file with the [Global] section; empty means the
	// OS_* environment variables.
	CloudConfig string
	// CloudNames are the --cloud-name values: at most one, the
	// [Global "name"] section of CloudConfig to read ("" is [Global]).
	CloudNames []string
	// InitiatorName is the iSCSI initiator IQN sent to Cinder and written
	// on iSCSI PVs. Required for iSCSI backends; there is no default.
	InitiatorName string
	// ConnectorHost and ConnectorIP describe the nodes to Cinder.
	ConnectorHost string
	ConnectorIP   string
	// WWPNs are Fibre Channel port names sent in the connector.
	WWPNs []string
	// ChapSecretNamespace holds the per-volume CHAP Secrets; empty means
	// the claim's namespace.
	ChapSecretNamespace string
	// StuckCreatingTimeout is how long a volume of this provisioner may
	// stay "creating" before it is force-deleted and created again.
	StuckCreatingTimeout time.Duration
	// TopologyKey is the node label holding a node's availability zone;
	// empty turns topology off.
	TopologyKey string

	// cloud is the validated CloudConfig (or environment).
	cloud *cloudconfig.Config
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	o := &Options{
		Common:               cli.NewCommon(DefaultProvisioner),
		ConnectorHost:        DefaultConnectorHost,
		StuckCreatingTimeout: cinder.DefaultStuckCreatingTimeout,
		TopologyKey:          cinder.DefaultTopologyKey,
	}
	// Derived in Run: it needs the API.
	o.IdentityDefault = "<provisioner>/<UID of the kube-system namespace> (Cinder volumes carry it too)"
	return o
}

// AddFlags adds the flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.CloudConfig, "cloud-config", o.CloudConfig,
		"INI file with a [Global] section saying how to reach Cinder (Keystone or noauth); empty means the OS_* environment variables.")
	fs.StringArrayVar(&o.CloudNames, "cloud-name", o.CloudNames,
		"The [Global \"NAME\"] section of --cloud-config to read, as cinder-csi-plugin's --cloud-name; default [Global]. One cloud per instance.")
	fs.StringVar(&o.InitiatorName, "initiator-name", o.InitiatorName,
		"iSCSI initiator IQN sent to Cinder and written on iSCSI PVs; the nodes log in with it. Required for iSCSI backends.")
	fs.StringVar(&o.ConnectorHost, "connector-host", o.ConnectorHost, "Host name sent to Cinder in the connector.")
	fs.StringVar(&o.ConnectorIP, "connector-ip", o.ConnectorIP, "IP address sent to Cinder in the connector, for backends that export to an address.")
	fs.StringSliceVar(&o.WWPNs, "wwpns", o.WWPNs, "Fibre Channel WWPNs of the nodes, sent in the connector for backends that zone or mask by WWPN.")
	fs.StringVar(&o.ChapSecretNamespace, "chap-secret-namespace", o.ChapSecretNamespace,
		"Namespace for the per-volume iSCSI CHAP Secrets; empty means the claim's namespace.")
	fs.DurationVar(&o.StuckCreatingTimeout, "stuck-creating-timeout", o.StuckCreatingTimeout,
		"How long a volume of this provisioner may stay creating in Cinder before it counts as stuck and is force-deleted and created again. Set it above the time your slowest backend takes to create a volume.")
	fs.StringVar(&o.TopologyKey, "topology-key", o.TopologyKey,
		"Node label whose value is the node's Cinder availability zone: volumes of WaitForFirstConsumer claims are created in the selected node's zone, and PVs require nodes of their volume's zone. \"\" turns topology off (PVs usable from every node). Needs get, list, watch on nodes.")

	// The flags of the original standalone Cinder provisioner, so that its
	// manifests keep working.
	fs.StringVar(&o.CloudConfig, "cloudconfig", o.CloudConfig, "")
	fs.StringVar(&o.Identity, "id", o.Identity, "")
	_ = fs.MarkDeprecated("cloudconfig", "use --cloud-config")
	_ = fs.MarkDeprecated("id", "use --identity")
}

// Complete reads the cloud configuration (--cloud-config, or the OS_*
// environment variables).
func (o *Options) Complete() error {
	if err := o.Common.Complete(); err != nil {
		return err
	}
	if len(o.CloudNames) > 1 {
		return fmt.Errorf("--cloud-name is given %d times (%s): one cinder-provisioner serves one cloud; run one instance per cloud, each with its own --provisioner", len(o.CloudNames), strings.Join(o.CloudNames, ", "))
	}
	cloudName := ""
	if len(o.CloudNames) == 1 {
		cloudName = o.CloudNames[0]
	}
	cloud, err := cloudconfig.Load(o.CloudConfig, cloudName)
	if err != nil {
		return err
	}
	o.cloud = cloud
	return nil
}

// Validate checks the flags and reads the cloud config, naming what is
// wrong.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate()}
	if o.InitiatorName != "" && !strings.HasPrefix(o.InitiatorName, "iqn.") && !strings.HasPrefix(o.InitiatorName, "eui.") && !strings.HasPrefix(o.InitiatorName, "naa.") {
		errs = append(errs, fmt.Errorf("--initiator-name %q is not an iqn., eui. or naa. name", o.InitiatorName))
	}
	for _, w := range o.WWPNs {
		if b, err := hex.DecodeString(strings.ReplaceAll(w, ":", "")); err != nil || len(b) != 8 {
			errs = append(errs, fmt.Errorf("--wwpns: %q is not a 16-digit WWPN", w))
		}
	}
	if o.StuckCreatingTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--stuck-creating-timeout must be more than 0, got %v", o.StuckCreatingTimeout))
	}
	if o.ChapSecretNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.ChapSecretNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--chap-secret-namespace %q: %s", o.ChapSecretNamespace, strings.Join(msgs, "; ")))
		}
	}
	if o.TopologyKey != "" {
		if msgs := validation.IsQualifiedName(o.TopologyKey); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--topology-key %q is not a label key: %s", o.TopologyKey, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}
