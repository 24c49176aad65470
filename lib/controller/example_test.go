// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeprov/external-storage/lib/controller"
)

// dirProvisioner keeps each volume in a directory under root.
type dirProvisioner struct{ root string }

func (p *dirProvisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	path := filepath.Join(p.root, o.PVName)
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
	}), controller.ProvisioningFinished, nil
}

func (p *dirProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	return os.RemoveAll(filepath.Join(p.root, pv.Name))
}

// A provisioner is two methods; the controller does the rest.
func ExampleNewProvisionController() {
	client := fake.NewClientset() // in a binary: a real clientset
	ctrl, err := controller.NewProvisionController(client, "example.com/dir", &dirProvisioner{root: os.TempDir()},
		controller.WithThreadiness(8),
		controller.WithFinalizer(true),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = ctrl // ctrl.Run(ctx) works until ctx ends
	fmt.Println("ready to run")
	// Output: ready to run
}

// Invalid options are all reported at once, each naming its option.
func ExampleNewProvisionController_invalidOptions() {
	_, err := controller.NewProvisionController(fake.NewClientset(), "example.com/dir", &dirProvisioner{},
		controller.WithThreadiness(0),
		controller.WithRetryInterval(0, 0),
	)
	fmt.Println(err)
	// Output:
	// invalid ProvisionController options: WithThreadiness: must be at least 1, got 0
	// WithRetryInterval: need 0 < start <= max, got start 0s, max 0s
}
