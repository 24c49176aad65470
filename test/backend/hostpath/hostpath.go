// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostpath is the hostpath-provisioner backend: the binary in
// single-node mode, its volumes directories under <Dir>/volumes.
package hostpath

import (
	"context"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

// Node is the node every volume is pinned to.
const Node = "backend-node"

// Backend runs hostpath-provisioner replicas sharing one volume directory.
type Backend struct {
	cfg      backend.Config
	pvDir    string
	replicas *backend.Replicas
}

var _ backend.Backend = (*Backend)(nil)

// New returns the backend; there is no storage system to start.
func New(_ context.Context, cfg backend.Config) (*Backend, error) {
	b := &Backend{cfg: cfg, pvDir: filepath.Join(cfg.Dir, "volumes")}
	b.replicas = backend.NewReplicas(cfg, backend.Binary{Module: "hostpath", Name: "hostpath-provisioner"},
		"--provisioner="+cfg.ProvisionerName, "--pv-dir="+b.pvDir, "--node-name="+Node)
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "hostpath" }

// ProvisionerName implements backend.Backend.
func (b *Backend) ProvisionerName() string { return b.cfg.ProvisionerName }

// Parameters implements backend.Backend: hostpath takes none.
func (b *Backend) Parameters() map[string]string { return nil }

// PVDir is the directory holding the volumes (--pv-dir).
func (b *Backend) PVDir() string { return b.pvDir }

// StartProvisioner implements backend.Backend.
func (b *Backend) StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error) {
	return b.replicas.Start(ctx, backend.Replica{Identity: identity, LeaderElection: leaderElection})
}

// Assets implements backend.Backend: the volume directories.
func (b *Backend) Assets(context.Context) ([]string, error) { return backend.Dirs(b.pvDir) }

// AssetOf implements backend.Backend: the directory of the PV's hostPath.
func (b *Backend) AssetOf(pv *corev1.PersistentVolume) string {
	if pv.Spec.HostPath == nil {
		return ""
	}
	return filepath.Base(pv.Spec.HostPath.Path)
}

// Outage implements backend.Backend: a directory has no outage of its own.
func (b *Backend) Outage(context.Context) (func(context.Context) error, error) {
	return nil, backend.ErrNoOutage
}

// Close implements backend.Backend; the volumes stay in Dir, which the
// caller owns.
func (b *Backend) Close() error { return nil }
