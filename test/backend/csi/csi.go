// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package csi is the csi-provisioner backend: the binary beside the
// stateful test driver (test/csidriver) on a unix socket, served in this
// process or, with Options.Process, by a process of its own that keeps its
// volumes on disk. Its assets are the driver's volume ids; its outage is
// the driver's socket gone (in this process) or the driver process killed
// with SIGKILL, while the volumes stay.
package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

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
	// BuildFlags are go build's flags for csi-provisioner, such as -race,
	// and for the driver's binary with Process.
	BuildFlags []string
	// Process runs the driver as a process of its own, the binary of
	// test/cmd/csidriver, with its volumes on disk (Driver.StateDir and
	// Driver.RequestLog default to files in the backend's Dir) instead of in
	// this process: Driver returns nil, StateDir and RequestLog say where to
	// look, and Outage kills the process with SIGKILL.
	Process bool
}

// Backend runs csi-provisioner replicas against one driver.
type Backend struct {
	cfg        backend.Config
	driver     *csidriver.Driver // in this process; nil with Options.Process
	socket     string
	socketTemp string // a directory of our own for the socket, if Dir is too deep
	replicas   *backend.Replicas

	// With Options.Process: the driver's binary, its options, the
	// processes started so far (the last one running unless down).
	driverBin  string
	driverOpts csidriver.Options
	procs      []*framework.Process

	mu   sync.Mutex
	down bool // the driver is stopped by Outage
}

var _ backend.Backend = (*Backend)(nil)

// New starts the driver with its defaults.
func New(ctx context.Context, cfg backend.Config) (*Backend, error) {
	return NewWithOptions(ctx, cfg, Options{})
}

// NewWithOptions starts the driver as opts say.
func NewWithOptions(ctx context.Context, cfg backend.Config, opts Options) (*Backend, error) {
	b := &Backend{cfg: cfg, socket: filepath.Join(cfg.Dir, "csi.sock")}
	if len(b.socket) > maxSocketPath {
		dir, err := os.MkdirTemp("", "csi")
		if err != nil {
			return nil, err
		}
		b.socketTemp, b.socket = dir, filepath.Join(dir, "csi.sock")
	}
	opts.Driver.Name = cfg.ProvisionerName
	if opts.Process {
		if err := b.startProcess(ctx, opts); err != nil {
			_ = b.Close()
			return nil, err
		}
	} else {
		var err error
		if b.driver, err = csidriver.New(opts.Driver); err != nil {
			_ = b.Close()
			return nil, err
		}
		if err := b.driver.Start(b.socket); err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("starting the CSI driver on %s: %w", b.socket, err)
		}
	}
	b.replicas = backend.NewReplicas(cfg, backend.Binary{Module: "csi", Name: "csi-provisioner", BuildFlags: opts.BuildFlags},
		"--csi-address="+b.socket)
	return b, nil
}

// NewProcess starts the driver with its defaults as a process of its own
// (Options.Process).
func NewProcess(ctx context.Context, cfg backend.Config) (*Backend, error) {
	return NewWithOptions(ctx, cfg, Options{Process: true})
}

// startProcess builds test/cmd/csidriver and runs it as opts say.
func (b *Backend) startProcess(ctx context.Context, opts Options) error {
	if opts.Driver.StateDir == "" {
		opts.Driver.StateDir = filepath.Join(b.cfg.Dir, "csi-driver-state")
	}
	if opts.Driver.RequestLog == "" {
		opts.Driver.RequestLog = filepath.Join(b.cfg.Dir, "csi-driver-requests.jsonl")
	}
	bin, err := framework.BuildBinary(ctx, "test", "csidriver", opts.BuildFlags...)
	if err != nil {
		return err
	}
	b.driverBin, b.driverOpts = bin, opts.Driver
	return b.runDriver(ctx)
}

// driverStartTimeout bounds the wait for a driver process to answer.
const driverStartTimeout = time.Minute

// runDriver starts a driver process, which answers on the socket when it
// returns.
func (b *Backend) runDriver(ctx context.Context) error {
	logPath := filepath.Join(b.cfg.Dir, fmt.Sprintf("csidriver-%d.log", len(b.procs)+1))
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{
		Binary:     b.driverBin,
		Args:       append([]string{"--endpoint=unix://" + b.socket}, b.driverOpts.Args()...),
		LogPath:    logPath,
		NoEndpoint: true,
		Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return csidriver.Probe(ctx, b.socket)
		},
		ReadyTimeout: driverStartTimeout,
	})
	if err != nil {
		return fmt.Errorf("starting the CSI driver process on %s: %w", b.socket, err)
	}
	b.procs = append(b.procs, p)
	b.cfg.Logf("Started the CSI driver process %s (pid %d) with its state in %s, log %s", b.cfg.ProvisionerName, p.Pid(), b.driverOpts.StateDir, logPath)
	return nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "csi" }

// ProvisionerName implements backend.Backend: the driver's name.
func (b *Backend) ProvisionerName() string { return b.cfg.ProvisionerName }

// Parameters implements backend.Backend: the driver needs none.
func (b *Backend) Parameters() map[string]string { return nil }

// Driver is the driver in this process, for faults and assertions beyond
// Backend's; nil with Options.Process.
func (b *Backend) Driver() *csidriver.Driver { return b.driver }

// StateDir is the driver process's Options.StateDir; "" in this process.
func (b *Backend) StateDir() string { return b.driverOpts.StateDir }

// RequestLog is the driver process's Options.RequestLog; "" in this process.
func (b *Backend) RequestLog() string { return b.driverOpts.RequestLog }

// DriverProcess is the driver process running now (nil in this process, or
// while Outage has it down).
func (b *Backend) DriverProcess() *framework.Process {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down || len(b.procs) == 0 {
		return nil
	}
	return b.procs[len(b.procs)-1]
}

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
	vols, err := b.volumes()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, v := range vols {
		ids = append(ids, v.ID)
	}
	return ids, nil
}

// volumes are the driver's volumes: in this process, or in its state file.
func (b *Backend) volumes() ([]csidriver.Volume, error) {
	if b.driver != nil {
		return b.driver.Volumes(), nil
	}
	return csidriver.ReadState(b.StateDir())
}

// AssetOf implements backend.Backend: the PV's volume handle.
func (b *Backend) AssetOf(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI == nil {
		return ""
	}
	return pv.Spec.CSI.VolumeHandle
}

// Outage implements backend.Backend: the driver stops serving and its
// socket goes, as when its container crashes: in this process its server
// stops, a driver process is killed (SIGKILL). The volumes stay. restore
// serves it on the same socket again, a process with the same state.
func (b *Backend) Outage(context.Context) (func(context.Context) error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return nil, fmt.Errorf("the CSI driver %s is down already", b.cfg.ProvisionerName)
	}
	if b.driver != nil {
		b.driver.Stop()
		b.cfg.Logf("Stopped the CSI driver %s", b.cfg.ProvisionerName)
	} else {
		p := b.procs[len(b.procs)-1]
		if err := p.Kill(); err != nil {
			return nil, fmt.Errorf("killing the CSI driver process %d: %w", p.Pid(), err)
		}
		b.cfg.Logf("Killed the CSI driver process %s (pid %d)", b.cfg.ProvisionerName, p.Pid())
	}
	b.down = true
	return func(ctx context.Context) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.down {
			return nil
		}
		if b.driver != nil {
			if err := b.driver.Start(b.socket); err != nil {
				return fmt.Errorf("restarting the CSI driver on %s: %w", b.socket, err)
			}
			b.cfg.Logf("Restarted the CSI driver %s", b.cfg.ProvisionerName)
		} else if err := b.runDriver(ctx); err != nil {
			return err
		}
		b.down = false
		return nil
	}, nil
}

// Close implements backend.Backend: the driver stops. A driver process
// that exited by itself, or found a data race, is an error.
func (b *Backend) Close() error {
	var errs []error
	if b.driver != nil {
		b.driver.Stop()
	}
	for _, p := range b.procs {
		if err := p.Stop(); err != nil {
			errs = append(errs, err)
		}
		if p.HasLog("WARNING: DATA RACE") {
			errs = append(errs, fmt.Errorf("the CSI driver process %d found a data race, see %s", p.Pid(), p.LogPath))
		}
	}
	if b.socketTemp != "" {
		errs = append(errs, os.RemoveAll(b.socketTemp))
	}
	return errors.Join(errs...)
}
