// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

// VolumeType is the volume type of the backend's StorageClass. Fibre
// Channel needs no per-volume Secret or iSCSI target: the cost of a claim is
// Cinder's and the provisioner's alone.
const VolumeType = "fibre_channel"

// StuckCreatingTimeout is the replicas' --stuck-creating-timeout.
const StuckCreatingTimeout = 30 * time.Second

// ErrMissing is New's error when the machine lacks Cinder or RabbitMQ.
var ErrMissing = errors.New("the Cinder stack cannot run here")

// Options change the backend beyond backend.Config.
type Options struct {
	// BuildFlags are go build's flags for cinder-provisioner, such as -race.
	BuildFlags []string
}

// Backend is cinder-provisioner with a Cinder stack of its own; replicas
// share the default identity (the provisioner name and the cluster's id),
// so any of them deletes the volumes another created.
type Backend struct {
	cfg      backend.Config
	replicas *backend.Replicas

	mu    sync.Mutex // guards stack
	stack *Stack
}

var _ backend.Backend = (*Backend)(nil)

// New starts the Cinder stack with the default options.
func New(ctx context.Context, cfg backend.Config) (*Backend, error) {
	return NewWithOptions(ctx, cfg, Options{})
}

// NewWithOptions starts the Cinder stack (~40 s) and writes the replicas'
// cloud config into cfg.Dir.
func NewWithOptions(ctx context.Context, cfg backend.Config, opts Options) (*Backend, error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s (run hack/deps/cinder.sh)", ErrMissing, strings.Join(missing, ", "))
	}
	stack, err := StartStack(ctx, StackOptions{Log: cfg.Logf})
	if err != nil {
		return nil, err
	}
	// The noauth form of the cloud config users write.
	conf := filepath.Join(cfg.Dir, "cloud.conf")
	content := fmt.Sprintf("[Global]\ncinder-endpoint = %s\nusername = admin\ntenant-id = %s\n", stack.Endpoint, Project)
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		return nil, errors.Join(err, stack.Stop())
	}
	b := &Backend{cfg: cfg, stack: stack}
	// A create that cinder-api dies in the middle of (Outage) can leave a
	// volume creating forever: it is replaced after StuckCreatingTimeout,
	// well within a test's wait for the claims to settle.
	b.replicas = backend.NewReplicas(cfg, backend.Binary{Module: "cinder", Name: "cinder-provisioner", BuildFlags: opts.BuildFlags},
		"--provisioner="+cfg.ProvisionerName, "--cloud-config="+conf, "--stuck-creating-timeout="+StuckCreatingTimeout.String())
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "cinder" }

// ProvisionerName implements backend.Backend.
func (b *Backend) ProvisionerName() string { return b.cfg.ProvisionerName }

// Parameters implements backend.Backend.
func (b *Backend) Parameters() map[string]string {
	return map[string]string{"type": VolumeType}
}

// Stack is the running Cinder, for faults and assertions beyond Backend's.
func (b *Backend) Stack() *Stack { return b.stack }

// StartProvisioner implements backend.Backend. A replica is ready once
// Cinder answers it: during an outage it does not become ready.
func (b *Backend) StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error) {
	return b.replicas.Start(ctx, backend.Replica{Identity: identity, LeaderElection: leaderElection})
}

// StartReplica runs a replica as rep says (extra flags, not waiting for
// readiness).
func (b *Backend) StartReplica(ctx context.Context, rep backend.Replica) (*framework.Process, error) {
	return b.replicas.Start(ctx, rep)
}

// Assets implements backend.Backend: the ids of the Cinder volumes, in any
// status. It fails while the Cinder API is down.
func (b *Backend) Assets(ctx context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	vols, err := b.stack.Volumes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing Cinder volumes: %w", err)
	}
	ids := make([]string, len(vols))
	for i, v := range vols {
		ids[i] = v.ID
	}
	return ids, nil
}

// AssetOf implements backend.Backend: the volume id the provisioner
// records on the PV.
func (b *Backend) AssetOf(pv *corev1.PersistentVolume) string {
	return pv.Annotations[cinderprov.AnnVolumeID]
}

// Outage implements backend.Backend: cinder-api stops (SIGTERM); the
// scheduler, the volume service and the volumes stay. restore starts it
// again and returns once it answers.
func (b *Backend) Outage(context.Context) (func(context.Context) error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.stack.StopAPI(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.stack.StartAPI(ctx)
	}, nil
}

// Close implements backend.Backend: the stack stops and its directory goes.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stack.Stop()
}
