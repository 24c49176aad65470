// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package slip is a provisioner with the mistakes
// TestOptionalInterfacesAssertedAndExact must find: a DeletionGuard method
// whose signature slipped, and a BlockProvisioner not asserted.
package slip

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/controller"
)

type slipProvisioner struct{}

var _ controller.Provisioner = (*slipProvisioner)(nil)

func (*slipProvisioner) Provision(context.Context, controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	return nil, controller.ProvisioningFinished, nil
}

func (*slipProvisioner) Delete(context.Context, *corev1.PersistentVolume) error { return nil }

// ShouldDelete lacks the context DeletionGuard's has.
func (*slipProvisioner) ShouldDelete(pv *corev1.PersistentVolume) bool { return true }

func (*slipProvisioner) SupportsBlock(context.Context) bool { return true }
