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

	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
)

// BinaryName is the name of the binary, its image and its user agent.
const BinaryName = "hostpath-provisioner"

// NewCommand returns the hostpath-provisioner command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	return cli.NewCommand(BinaryName, "Provisions PersistentVolumes as directories on a node's filesystem", o)
}

// Run provisions until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	p, err := hostpath.New(hostpath.Config{
		Dir: o.PVDir, ConfigFile: o.Config, ReloadInterval: o.ConfigReloadInterval, NodeLabelKey: o.NodeLabelKey,
		Node: o.NodeName, DirMode: o.DirMode, NodeLocal: o.NodeLocal,
	})
	if err != nil {
		return err
	}
	if o.Config == "" {
		// Pods reach their volumes through bind mounts, never through --pv-dir.
		if err := os.MkdirAll(o.PVDir, 0o750); err != nil {
			return fmt.Errorf("--pv-dir: %w", err)
		}
	}
	go p.WatchConfig(ctx)
	clients, err := o.NewClients(BinaryName)
	if err != nil {
		return err
	}
	ro := cli.RunOptions{Ready: map[string]httpendpoint.Check{"pv-dir": o.checkPVDir}}
	if o.NodeLocal {
		// Instances on different nodes run side by side, each with its own
		// in-flight operations: they must not share one journal.
		ro.Controller = append(ro.Controller, controller.WithJournal(o.Namespace(), controller.JournalName(o.Provisioner, o.NodeName)))
	}
	klog.FromContext(ctx).Info("Starting", "provisioner", o.Provisioner, "node", o.NodeName, "pvDir", o.PVDir, "config", o.Config,
		"dirMode", fmt.Sprintf("%#o", uint32(o.DirMode)), "nodeLocal", o.NodeLocal)
	return o.Common.Run(ctx, clients, o.Provisioner, p, ro)
}

// checkPVDir fails readiness while --pv-dir is not a directory (for example
// when the hostPath mount of the pod went wrong).
func (o *Options) checkPVDir(*http.Request) error {
	if o.Config != "" {
		return nil
	}
	fi, err := os.Stat(o.PVDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("--pv-dir %s is not a directory", o.PVDir)
	}
	return nil
}
