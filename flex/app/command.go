// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
)

// BinaryName is the command's name.
const BinaryName = "flex-provisioner"

// NewCommand returns the flex-provisioner command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	return cli.NewCommand(BinaryName,
		"Provisions PersistentVolumes with a driver executable or a provisioning container image", o)
}

// Run builds the provisioner and runs it until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	clients, err := o.NewClients(BinaryName)
	if err != nil {
		return err
	}
	ready := map[string]httpendpoint.Check{}
	var launcher flex.Launcher
	switch o.Launcher {
	case LauncherExec:
		launcher = &flex.ExecLauncher{Driver: o.Driver, Timeout: o.DriverTimeout}
		ready["driver"] = func(*http.Request) error {
			fi, err := os.Stat(o.Driver)
			if err != nil {
				return err
			}
			if fi.Mode().Perm()&0o111 == 0 {
				return fmt.Errorf("%s is not executable", o.Driver)
			}
			return nil
		}
	case LauncherContainer:
		key, err := flex.LoadRecordKey(ctx, clients.Kube, o.ConfigNamespace)
		if err != nil {
			return err
		}
		launcher = &flex.PodLauncher{Client: clients.Kube, Namespace: o.ConfigNamespace, Deadline: o.DriverTimeout, StartTimeout: o.PodStartTimeout, RecordKey: key,
			AllowConfigNamespaces: o.AllowConfigNamespaces}
	}
	p, err := flex.New(flex.Options{
		Name:       o.Provisioner,
		Identity:   o.Identity,
		Launcher:   launcher,
		FlexDriver: o.FlexDriver,
		Client:     clients.Kube,
	})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Starting", "provisioner", o.Provisioner, "identity", o.Identity, "launcher", o.Launcher)
	return o.Common.Run(ctx, clients, o.Provisioner, p, cli.RunOptions{Ready: ready})
}
