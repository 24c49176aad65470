// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package flex is the flex-provisioner backend: the binary with the exec
// launcher and the test driver script (test/testdata/flex/test-driver) in
// its flex mode, which makes a directory per volume. Its outage is the
// driver hanging until it is restored.
package flex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// FlexDriver is the FlexVolume driver of the PVs (--flex-driver).
	FlexDriver = "kubeprov~test"
	// DriverTimeout is --driver-timeout: during an outage each claim's
	// driver run is killed after it and the claim gets a Warning event.
	// Config.ExtraArgs can override it.
	DriverTimeout = "10s"
	// hangMarker, in the driver's root, makes every driver call wait.
	hangMarker = "hang"
	// callsDir, in the driver's root, records the driver's input.
	callsDir = "calls"
)

// ErrMissing says that a tool the driver script needs is not installed.
var ErrMissing = errors.New("the flex test driver cannot run here")

// Missing lists the tools the driver script needs that are not installed.
func Missing() []string {
	var missing []string
	for _, tool := range []string{"sh", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	return missing
}

// Backend runs flex-provisioner replicas sharing one driver root.
type Backend struct {
	cfg      backend.Config
	root     string
	replicas *backend.Replicas
}

var _ backend.Backend = (*Backend)(nil)

// New checks that the driver script can run; there is nothing to start.
func New(_ context.Context, cfg backend.Config) (*Backend, error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s (run hack/deps/flex.sh)", ErrMissing, strings.Join(missing, ", "))
	}
	repo, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, root: filepath.Join(cfg.Dir, "volumes")}
	if err := os.MkdirAll(b.root, 0o755); err != nil {
		return nil, err
	}
	b.replicas = backend.NewReplicas(cfg, backend.Binary{Module: "flex", Name: "flex-provisioner"},
		"--provisioner="+cfg.ProvisionerName, "--launcher=exec",
		"--driver="+filepath.Join(repo, "test", "testdata", "flex", "test-driver"),
		"--flex-driver="+FlexDriver, "--driver-timeout="+DriverTimeout)
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "flex" }

// ProvisionerName implements backend.Backend.
func (b *Backend) ProvisionerName() string { return b.cfg.ProvisionerName }

// Parameters implements backend.Backend: the driver's root and mode.
func (b *Backend) Parameters() map[string]string {
	return map[string]string{"root": b.root, "mode": "flex"}
}

// Root is the driver's root: a directory per volume, and the input of every
// call under calls/.
func (b *Backend) Root() string { return b.root }

// StartProvisioner implements backend.Backend.
func (b *Backend) StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error) {
	return b.replicas.Start(ctx, backend.Replica{Identity: identity, LeaderElection: leaderElection})
}

// Assets implements backend.Backend: the volume directories.
func (b *Backend) Assets(context.Context) ([]string, error) { return backend.Dirs(b.root, callsDir) }

// AssetOf implements backend.Backend: the volumeID the driver returned,
// its directory's name.
func (b *Backend) AssetOf(pv *corev1.PersistentVolume) string {
	if pv.Spec.FlexVolume == nil {
		return ""
	}
	return pv.Spec.FlexVolume.Options["volumeID"]
}

// Outage implements backend.Backend: every driver call, provision or
// delete, hangs until restore; flex-provisioner kills each run at
// --driver-timeout and retries.
func (b *Backend) Outage(context.Context) (func(context.Context) error, error) {
	marker := filepath.Join(b.root, hangMarker)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return nil, err
	}
	b.cfg.Logf("The flex driver hangs until %s is removed", marker)
	return func(context.Context) error {
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		b.cfg.Logf("The flex driver answers again")
		return nil
	}, nil
}

// Close implements backend.Backend; the volumes stay in Dir, which the
// caller owns.
func (b *Backend) Close() error { return nil }
