// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the flex-provisioner command: its options and how they
// become a running provisioner.
package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/lib/cli"
)

// Defaults of the flex-provisioner flags.
const (
	DefaultProvisioner     = "kubeprov.io/flex"
	DefaultLauncher        = LauncherExec
	DefaultDriverTimeout   = flex.DefaultDriverTimeout
	DefaultPodStartTimeout = flex.DefaultPodStartTimeout
)

// Launchers selectable with --launcher.
const (
	LauncherExec      = "exec"
	LauncherContainer = "container"
)

// Options are the flex-provisioner flags.
type Options struct {
	cli.Common
	Launcher      string
	Driver        string
	DriverTimeout time.Duration
	FlexDriver    string
	// ConfigNamespace holds the provisioner's ConfigMaps and record key;
	// Complete defaults it to the pod's namespace.
	ConfigNamespace string
	// AllowConfigNamespaces are the other namespaces whose ConfigMaps a
	// StorageClass may name as its provisioner ConfigMap.
	AllowConfigNamespaces []string
	PodStartTimeout       time.Duration
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	o := &Options{
		Common:          cli.NewCommon(DefaultProvisioner),
		Launcher:        DefaultLauncher,
		DriverTimeout:   DefaultDriverTimeout,
		PodStartTimeout: DefaultPodStartTimeout,
	}
	o.IdentityDefault = "<provisioner>/<--config-namespace>, stable across restarts"
	return o
}

// AddFlags adds the shared flags and the flex ones to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.Launcher, "launcher", o.Launcher, "How drivers run: exec (--driver, an executable in this image) or container (a pod per operation, configured by a ConfigMap per StorageClass).")
	fs.StringVar(&o.Driver, "driver", o.Driver, "Exec launcher: path of the driver executable, called as '<driver> provision|delete <json>'.")
	fs.DurationVar(&o.DriverTimeout, "driver-timeout", o.DriverTimeout,
		"Exec launcher: bound of one driver run, after which its process group is killed. Container launcher: default activeDeadlineSeconds of the pods.")
	fs.StringVar(&o.FlexDriver, "flex-driver", o.FlexDriver, "FlexVolume driver name (vendor~driver as installed on the nodes) of FlexVolume sources a driver returns without a driver name.")
	fs.StringVar(&o.ConfigNamespace, "config-namespace", o.ConfigNamespace,
		"Container launcher: namespace of the provisioner ConfigMaps found by label or named without a namespace, and where pods run unless a ConfigMap says otherwise. Empty means this pod's namespace (POD_NAMESPACE).")
	fs.StringSliceVar(&o.AllowConfigNamespaces, "allow-config-namespaces", o.AllowConfigNamespaces,
		"Container launcher: namespaces besides --config-namespace whose ConfigMaps a StorageClass may name in provisionerConfig. Whoever can write ConfigMaps in them chooses the image whose answer becomes a PV. Empty (the default): none.")
	fs.DurationVar(&o.PodStartTimeout, "pod-start-timeout", o.PodStartTimeout, "Container launcher: how long a pod may take to be scheduled and started before it is given up.")
}

// Validate checks the flags, naming each flag at fault.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate()}
	if o.DriverTimeout <= 0 {
		errs = append(errs, errors.New("--driver-timeout must be more than 0"))
	}
	if o.Timeout > 0 && o.Timeout <= o.DriverTimeout {
		errs = append(errs, fmt.Errorf("--timeout (%v) must be 0 or more than --driver-timeout (%v), or every slow driver run is cut short", o.Timeout, o.DriverTimeout))
	}
	switch o.Launcher {
	case LauncherExec:
		if o.Driver == "" {
			errs = append(errs, errors.New("--driver is required with --launcher=exec"))
		} else if fi, err := os.Stat(o.Driver); err != nil {
			errs = append(errs, fmt.Errorf("--driver: %w", err))
		} else if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("--driver %s is not an executable file", o.Driver))
		}
	case LauncherContainer:
		if o.PodStartTimeout <= 0 {
			errs = append(errs, errors.New("--pod-start-timeout must be more than 0"))
		}
		if o.Driver != "" {
			errs = append(errs, errors.New("--driver is for --launcher=exec; the container launcher runs the image its ConfigMap names"))
		}
		for _, ns := range o.AllowConfigNamespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("--allow-config-namespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("--launcher must be %s or %s, got %q", LauncherExec, LauncherContainer, o.Launcher))
	}
	return errors.Join(errs...)
}

// Complete defaults --config-namespace to the pod's namespace and --identity
// to <provisioner>/<config namespace>: stable across restarts and distinct
// for two installations of one name.
func (o *Options) Complete() error {
	if err := o.Common.Complete(); err != nil {
		return err
	}
	if o.ConfigNamespace == "" {
		o.ConfigNamespace = o.Namespace()
	}
	if o.Identity == "" {
		o.Identity = o.Provisioner + "/" + o.ConfigNamespace
	}
	return nil
}
