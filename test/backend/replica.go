// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kubeprov/external-storage/test/framework"
)

// Leader-election timings of replicas started with leader election: a killed
// leader is replaced within seconds instead of the production defaults' 15 s.
// Config.ExtraArgs can override them.
const (
	LeaseDuration = "4s"
	RenewDeadline = "3s"
	RetryPeriod   = "500ms"
)

// Binary is a provisioner binary: <repo>/<Module>/cmd/<Name>, built with
// go build's BuildFlags (such as -race).
type Binary struct {
	Module, Name string
	BuildFlags   []string
}

// Replica is one replica to start.
type Replica struct {
	// Identity tells replicas apart: their log files, progress reports.
	Identity string
	// LeaderElection makes the replica compete for the backend's Lease.
	LeaderElection bool
	// Args come last, after Config.ExtraArgs: they override every other flag.
	Args []string
	// NoWait returns once the process has started, before it is ready.
	NoWait bool
	// Env is added to the replica's environment ("KEY=value"), for
	// example NODE_NAME for one instance per node.
	Env []string
}

// Replicas starts the replicas of a backend's provisioner binary.
type Replicas struct {
	cfg  Config
	bin  Binary
	args []string

	mu      sync.Mutex
	path    string         // the built binary, once built
	started map[string]int // replicas started so far, per identity
}

// NewReplicas returns the starter of a backend's replicas; args are the
// backend's own flags, given to every replica.
func NewReplicas(cfg Config, bin Binary, args ...string) *Replicas {
	return &Replicas{cfg: cfg, bin: bin, args: args, started: map[string]int{}}
}

// Start builds the binary (the first time) and runs a replica against the
// control plane with, in this order (later flags override earlier ones):
// the shared flags below, the backend's own, Config.ExtraArgs and the
// replica's Args. The replica keeps its journal and its Lease in
// Config.Namespace, retries failed operations after 100 ms up to 2 s, logs
// at -v=2 to <Config.Dir>/<binary>-<identity>-<n>.log (n counts the
// replicas of that identity) and, with LeaderElection, competes for the
// Lease with the timings above.
//
// It returns once /readyz answers ok (unless NoWait). A standby replica is
// ready too: the shared plumbing's readiness is the informer caches and the
// backend's dependencies, checked before leader election begins.
func (r *Replicas) Start(ctx context.Context, rep Replica) (*framework.Process, error) {
	bin, err := r.build(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.started[rep.Identity]++
	n := r.started[rep.Identity]
	r.mu.Unlock()

	common := []string{
		"--kubeconfig=" + r.cfg.ControlPlane.KubeconfigPath,
		"--leader-election-namespace=" + r.cfg.Namespace,
		"--retry-interval-start=100ms",
		"--retry-interval-max=2s",
		"-v=2",
	}
	if rep.LeaderElection {
		common = append(common, "--leader-election",
			"--leader-election-lease-duration="+LeaseDuration,
			"--leader-election-renew-deadline="+RenewDeadline,
			"--leader-election-retry-period="+RetryPeriod)
	}
	logPath := filepath.Join(r.cfg.Dir, fmt.Sprintf("%s-%s-%d.log", r.bin.Name, rep.Identity, n))
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{
		Binary:  bin,
		Args:    slices.Concat(common, r.args, r.cfg.ExtraArgs, rep.Args),
		LogPath: logPath,
		NoWait:  rep.NoWait,
		Env:     rep.Env,
	})
	if err != nil {
		return nil, fmt.Errorf("starting %s replica %s: %w", r.bin.Name, rep.Identity, err)
	}
	r.cfg.Logf("Started %s replica %s (pid %d, leader election %v), log %s", r.bin.Name, rep.Identity, p.Pid(), rep.LeaderElection, logPath)
	return p, nil
}

// build compiles the binary once per Replicas; a failed build is retried
// by the next Start.
func (r *Replicas) build(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path != "" {
		return r.path, nil
	}
	path, err := framework.BuildBinary(ctx, r.bin.Module, r.bin.Name, r.bin.BuildFlags...)
	if err != nil {
		return "", err
	}
	r.path = path
	return path, nil
}

// Logf reports progress through Log, if set.
func (c Config) Logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}
