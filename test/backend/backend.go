// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package backend runs each of the project's provisioners with its real
// storage system, behind one interface, so that the scale benchmark
// (test/bench) and the fault suite (test/faults) drive all five alike:
// start the storage, run provisioner replicas as child processes, count the
// storage assets against the PVs, and take the storage away and back.
//
// Each provisioner has a subpackage (hostpath, csi, nfs, cinder, flex) with a
// New function returning a Backend.
package backend

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/test/framework"
)

// Backend is one provisioner with its storage system.
type Backend interface {
	// Name is the provisioner's directory: hostpath, csi, nfs, cinder, flex.
	Name() string
	// ProvisionerName is what StorageClasses name in their provisioner field.
	ProvisionerName() string
	// Parameters are the StorageClass parameters a class of this backend
	// needs; the caller creates the class (Immediate binding, Delete).
	Parameters() map[string]string

	// StartProvisioner runs one replica of the provisioner binary against the
	// control plane and returns once it is ready (or, with leader election on
	// and another replica leading, once it is running). identity tells
	// replicas apart (their log file, their leader-election identity); with
	// leaderElection the replicas share one Lease. The caller stops it.
	StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error)

	// Assets lists the storage assets that exist now, each by the name the
	// backend knows it by (a directory, a CSI volume id, a Cinder volume id).
	Assets(ctx context.Context) ([]string, error)
	// AssetOf is the asset a PV of this backend stands for, as Assets names it.
	AssetOf(pv *corev1.PersistentVolume) string

	// Outage makes the storage system unavailable the way it fails in real
	// life (the CSI driver's socket gone, the Cinder API stopped, Ganesha
	// stopped, the flex driver hanging) and returns the function that brings
	// it back. Backends without a separate storage system (hostpath) return
	// ErrNoOutage.
	Outage(ctx context.Context) (restore func(context.Context) error, err error)

	// Close stops the storage system and removes what the backend created
	// outside the control plane.
	Close() error
}

// Config is what every backend is given.
type Config struct {
	// ControlPlane is the running control plane.
	ControlPlane *framework.ControlPlane
	// Namespace holds the provisioner's journal and Lease.
	Namespace string
	// ProvisionerName is the provisioner name to register, unique per test so
	// that tests sharing a control plane never serve each other's claims.
	ProvisionerName string
	// Dir is a scratch directory the backend owns (logs, state, sockets).
	Dir string
	// ExtraArgs are added to every replica's command line (after the
	// backend's own flags, so they override them), e.g. --kube-api-qps.
	ExtraArgs []string
	// Log reports progress; nil is quiet.
	Log func(format string, args ...any)
}

// ErrNoOutage is Outage's answer for a backend whose storage cannot fail
// apart from the provisioner.
var ErrNoOutage = errors.New("this backend has no storage system apart from the provisioner")
