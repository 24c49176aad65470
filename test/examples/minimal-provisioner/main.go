// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command minimal-provisioner is the complete program of
// docs/writing-a-provisioner.md: a provisioner whose volumes are directories
// under --root, with every flag, metric and health endpoint of the project's
// own binaries. CI compiles it and checks that the guide shows it verbatim.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
)

// dirProvisioner keeps each volume in <root>/<pv name>.
type dirProvisioner struct {
	root string
}

// Provision is called for every claim of a class that names this
// provisioner. It must be idempotent: after a restart it is called again for
// the same PV name and must find the same directory.
func (p *dirProvisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if len(o.StorageClass.Parameters) > 0 {
		// A sentence the user can act on: it becomes a ProvisioningFailed event.
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %s: this provisioner takes no parameters", o.StorageClass.Name)
	}
	path := filepath.Join(p.root, o.PVName)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating %s: %w", path, err)
	}
	// NewVolume fills in claim reference, class, reclaim policy, mount
	// options, access modes, volume mode and capacity.
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
	}), controller.ProvisioningFinished, nil
}

// Delete is called for released volumes whose reclaim policy is Delete. An
// asset that is already gone is success.
func (p *dirProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	err := os.RemoveAll(filepath.Join(p.root, pv.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// options are the program's flags: the shared family (--kubeconfig,
// --provisioner, --leader-election, --http-endpoint, --worker-threads, ...)
// and its own.
type options struct {
	cli.Common
	root string
}

func (o *options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.root, "root", "/var/lib/minimal-provisioner", "Directory holding the volumes.")
}

// Validate names the flag at fault; it changes nothing.
func (o *options) Validate() error {
	if !filepath.IsAbs(o.root) {
		return fmt.Errorf("--root must be an absolute path, got %q", o.root)
	}
	return o.Common.Validate()
}

func (o *options) Run(ctx context.Context) error {
	clients, err := o.NewClients("minimal-provisioner")
	if err != nil {
		return err
	}
	return o.Common.Run(ctx, clients, o.Provisioner, &dirProvisioner{root: o.root}, cli.RunOptions{})
}

func main() {
	o := &options{Common: cli.NewCommon("example.com/minimal")}
	if err := cli.NewCommand("minimal-provisioner", "Provisions volumes as directories", o).Execute(); err != nil {
		os.Exit(1)
	}
}
