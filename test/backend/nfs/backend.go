// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

// Backend is nfs-provisioner in server mode with a Ganesha of its own.
//
// As deployed (nfs/deploy/server), nfs-provisioner runs Ganesha itself
// (--run-server) and restarts it within seconds when it dies. Here replicas
// run with --run-server=false and share one Ganesha, export root and
// configuration file, as containers of one pod would: with --run-server
// every replica would start a Ganesha of its own and all but the first would
// fail (one D-Bus name, fixed ports), and a killed Ganesha would be back
// before a test could look. Ganesha is the storage system, which Outage
// kills and which stays down until restored.
//
// Only one replica may be active at a time (leader election, or one
// replica), as in the StatefulSet: replicas edit the configuration file
// under a lock of their own process only.
type Backend struct {
	cfg      backend.Config
	layout   Layout
	replicas *backend.Replicas
	unlock   func()

	mu      sync.Mutex // guards ganesha
	ganesha *Ganesha
}

var _ backend.Backend = (*Backend)(nil)

// ErrMissing is New's error when the machine lacks what an NFS server needs.
var ErrMissing = errors.New("the NFS server cannot run here")

// Options change the backend beyond backend.Config.
type Options struct {
	// BuildFlags are go build's flags for nfs-provisioner, such as -race.
	BuildFlags []string
}

// New starts Ganesha with the default options.
func New(ctx context.Context, cfg backend.Config) (*Backend, error) {
	return NewWithOptions(ctx, cfg, Options{})
}

// NewWithOptions starts Ganesha (waiting first for any other Ganesha of
// this machine's tests to stop: see Lock) with its state in cfg.Dir.
func NewWithOptions(ctx context.Context, cfg backend.Config, opts Options) (*Backend, error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s (run hack/deps/nfs.sh)", ErrMissing, strings.Join(missing, ", "))
	}
	unlock, err := Lock(ctx)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, layout: NewLayout(filepath.Join(cfg.Dir, "server")), unlock: unlock}
	b.replicas = backend.NewReplicas(cfg, backend.Binary{Module: "nfs", Name: "nfs-provisioner", BuildFlags: opts.BuildFlags},
		append(b.layout.Args(cfg.ProvisionerName), "--run-server=false")...)
	if b.ganesha, err = StartGanesha(ctx, b.layout, cfg.Dir); err != nil {
		unlock()
		return nil, err
	}
	cfg.Logf("NFS-Ganesha serves %s on %s", b.layout.ExportRoot, Loopback)
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "nfs" }

// ProvisionerName implements backend.Backend.
func (b *Backend) ProvisionerName() string { return b.cfg.ProvisionerName }

// Parameters implements backend.Backend: exports without root squash, the
// default said explicitly.
func (b *Backend) Parameters() map[string]string {
	return map[string]string{"rootSquash": "false"}
}

// StartProvisioner implements backend.Backend. The replica is ready once
// Ganesha answers it on D-Bus: during an outage it does not become ready.
func (b *Backend) StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error) {
	return b.replicas.Start(ctx, backend.Replica{Identity: identity, LeaderElection: leaderElection})
}

// StartReplica runs a replica as rep says (extra flags, not waiting for
// readiness).
func (b *Backend) StartReplica(ctx context.Context, rep backend.Replica) (*framework.Process, error) {
	return b.replicas.Start(ctx, rep)
}

// Layout is where the server keeps its state.
func (b *Backend) Layout() Layout { return b.layout }

// Assets implements backend.Backend: the volume directories of the export
// root, by name (the PV's name). A claim that failed while Ganesha was down
// has its directory already; its PV comes once Ganesha is back.
func (b *Backend) Assets(context.Context) ([]string, error) {
	return b.layout.VolumeDirs()
}

// AssetOf implements backend.Backend: the directory the PV's NFS source
// names, if it is one of the export root; "" otherwise.
func (b *Backend) AssetOf(pv *corev1.PersistentVolume) string {
	if pv.Spec.NFS == nil || filepath.Dir(filepath.Clean(pv.Spec.NFS.Path)) != b.layout.ExportRoot {
		return ""
	}
	return filepath.Base(pv.Spec.NFS.Path)
}

// Outage implements backend.Backend: ganesha.nfsd is killed (SIGKILL, as a
// crash or the OOM killer ends it) and stays down; NFS clients and the
// provisioner's D-Bus calls fail. restore starts it again from its
// configuration file, with every export it had.
func (b *Backend) Outage(ctx context.Context) (func(context.Context) error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ganesha.Kill(ctx); err != nil {
		return nil, fmt.Errorf("killing ganesha.nfsd: %w", err)
	}
	b.cfg.Logf("NFS-Ganesha killed")
	return func(ctx context.Context) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if err := b.ganesha.Start(ctx); err != nil {
			return fmt.Errorf("restarting ganesha.nfsd: %w", err)
		}
		b.cfg.Logf("NFS-Ganesha restarted")
		return nil
	}, nil
}

// Close implements backend.Backend: it stops Ganesha and the daemons
// started with it. The export root stays in Config.Dir.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.ganesha.Close()
	b.unlock()
	return err
}
