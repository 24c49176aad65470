// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package csi is the csi-provisioner backend: the binary beside the
// stateful test driver (test/csidriver), served in this process on a unix
// socket. Its assets are the driver's volume ids; its outage is the
// driver's socket gone while the volumes stay.
package csi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

// maxSocketPath keeps a unix socket path within the kernel's 108 bytes.
const maxSocketPath = 100

// Options change the backend beyond backend.Config.
type Options struct {
	// Driver configures the driver; its Name is always the provisioner name,
	// under which csi-provisioner registers.
	Driver csidriver.Options
	// BuildFlags are go build's flags for csi-provisioner, such as -race.
	BuildFlags []string
}

// Backend runs csi-provisioner replicas against one driver.
type Backend struct {
	cfg        backend.Config
	driver     *csidriver.Driver
	socket     string
	socketTemp string // a directory of our own for the socket, if Dir is too deep
	replicas   *backend.Replicas

	mu   sync.Mutex
	down bool // the driver is stopped by Outage
}

var _ backend.Backend = (*Backend)(nil)

// New starts the driver with its defaults.
func New(ctx context.Context, cfg backend.Config) (*Backend, error) {
	return NewWithOptions(ctx, cfg, Options{})
}

// NewWithOptions starts the driver as opts say.
func NewWithOptions(_ context.Context, cfg backend.Config, opts Options) (*Backend, error) {
	b := &Backend{cfg: cfg, socket: filepath.Join(cfg.Dir, "csi.sock")}
	if len(b.socket) > maxSocketPath {
		dir, err := os.MkdirTemp("", "csi")
		if err != nil {
			return nil, err
		}
		b.socketTemp, b.socket = dir, filepath.Join(dir, "csi.sock")
	}
	opts.Driver.Name = cfg.ProvisionerName
	b.driver = csidriver.New(opts.Driver)
	if err := b.driver.Start(b.socket); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("starting the CSI driver on %s: %w", b.socket, err)
	}
	b.replicas = backend.NewReplicas(cfg, backend.Binary{Module: "csi", Name: "csi-provisioner", BuildFlags: opts.BuildFlags},
		"--csi-address="+b.socket)
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "csi" }

// ProvisionerName implements backend.Backend: the driver's name.
func (b *Backend) ProvisionerName() string { return b.cfg.ProvisionerName }

// Parameters implements backend.Backend: the driver needs none.
func (b *Backend) Parameters() map[string]string { return nil }

// Driver is the driver, for faults and assertions beyond Backend's.
func (b *Backend) Driver() *csidriver.Driver { return b.driver }

// Socket is the driver's unix socket (--csi-address).
func (b *Backend) Socket() string { return b.socket }

// StartProvisioner implements backend.Backend.
func (b *Backend) StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error) {
	return b.StartReplica(ctx, backend.Replica{Identity: identity, LeaderElection: leaderElection})
}

// StartReplica runs a replica as rep says: more flags, or no waiting for
// readiness.
func (b *Backend) StartReplica(ctx context.Context, rep backend.Replica) (*framework.Process, error) {
	return b.replicas.Start(ctx, rep)
}

// Assets implements backend.Backend: the driver's volume ids.
func (b *Backend) Assets(context.Context) ([]string, error) {
	var ids []string
	for _, v := range b.driver.Volumes() {
		ids = append(ids, v.ID)
	}
	return ids, nil
}

// AssetOf implements backend.Backend: the PV's volume handle.
func (b *Backend) AssetOf(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI == nil {
		return ""
	}
	return pv.Spec.CSI.VolumeHandle
}

// Outage implements backend.Backend: the driver stops serving and its
// socket goes, as when its container crashes; the volumes stay. restore
// serves it on the same socket again.
func (b *Backend) Outage(context.Context) (func(context.Context) error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return nil, fmt.Errorf("the CSI driver %s is down already", b.cfg.ProvisionerName)
	}
	b.driver.Stop()
	b.down = true
	b.cfg.Logf("Stopped the CSI driver %s", b.cfg.ProvisionerName)
	return func(context.Context) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.down {
			return nil
		}
		if err := b.driver.Start(b.socket); err != nil {
			return fmt.Errorf("restarting the CSI driver on %s: %w", b.socket, err)
		}
		b.down = false
		b.cfg.Logf("Restarted the CSI driver %s", b.cfg.ProvisionerName)
		return nil
	}, nil
}

// Close implements backend.Backend: the driver stops.
func (b *Backend) Close() error {
	b.driver.Stop()
	if b.socketTemp != "" {
		return os.RemoveAll(b.socketTemp)
	}
	return nil
}
