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

func main() {
	common := cli.NewCommon() // --kubeconfig, --leader-election, --http-endpoint, --worker-threads, ...
	var name, root string
	cmd := cli.NewCommand("minimal-provisioner", "Provisions volumes as directories",
		func(fs *pflag.FlagSet) {
			common.AddFlags(fs)
			fs.StringVar(&name, "provisioner", "example.com/minimal", "Name StorageClasses use in their provisioner field.")
			fs.StringVar(&root, "root", "/var/lib/minimal-provisioner", "Directory holding the volumes.")
		},
		common.Validate,
		func(ctx context.Context) error {
			clients, err := common.NewClients("minimal-provisioner")
			if err != nil {
				return err
			}
			return common.Run(ctx, clients, name, &dirProvisioner{root: root}, cli.RunOptions{})
		})
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
