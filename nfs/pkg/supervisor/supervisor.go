// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package supervisor runs the daemons an NFS server needs beside
// nfs-provisioner in one container (rpcbind, the system D-Bus, ganesha.nfsd):
// it starts them in order, reuses one that is already running instead of
// starting a duplicate, restarts those it started when they exit (with
// exponential backoff) and stops them, in reverse order, on shutdown. Each
// process depends on those before it (Ganesha registers with rpcbind and
// D-Bus when it starts), so restarting one restarts those after it too.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Defaults of Options.
const (
	DefaultBackoffStart = 1 * time.Second
	DefaultBackoffMax   = 1 * time.Minute
	DefaultStopTimeout  = 10 * time.Second
	DefaultReadyTimeout = 1 * time.Minute
	// stableAfter resets the backoff: a daemon that ran this long was fine.
	stableAfter = 1 * time.Minute
)

// Process is one daemon.
type Process struct {
	// Name for logs.
	Name string
	// Path and Args of the command, which must stay in the foreground.
	Path string
	Args []string
	// Running, if set, reports whether an instance that this supervisor did
	// not start already serves; then it is reused and left alone.
	Running func(ctx context.Context) bool
	// Ready, if set, reports whether a started instance serves yet; Start
	// waits for it before starting the next process.
	Ready func(ctx context.Context) error
	// Prepare, if set, runs before each start (create run directories,
	// remove stale sockets).
	Prepare func() error
}

// Options tune a Supervisor.
type Options struct {
	BackoffStart, BackoffMax time.Duration
	StopTimeout              time.Duration
	ReadyTimeout             time.Duration
	// Output receives the daemons' stdout and stderr; default os.Stderr.
	Output io.Writer
	// OnStart, if set, is called after each (re)start with the new pid.
	OnStart func(name string, pid int)
}

func (o *Options) defaults() {
	if o.BackoffStart <= 0 {
		o.BackoffStart = DefaultBackoffStart
	}
	if o.BackoffMax < o.BackoffStart {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffStart)
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Output == nil {
		o.Output = os.Stderr
	}
}

// Supervisor runs processes until Stop.
type Supervisor struct {
	opts   Options
	logger klog.Logger
	cancel context.CancelFunc
	// signal sends sig to p (os.Process.Signal; replaced in tests).
	signal func(p *os.Process, sig os.Signal) error
	mu     sync.Mutex
	// running are the processes started here, in start order.
	running []*running
}

// started returns a copy of running.
func (s *Supervisor) started() []*running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*running(nil), s.running...)
}

type running struct {
	proc Process
	mu   sync.Mutex
	cmd  *exec.Cmd
	// exited is closed (and replaced) each time the current process exits.
	exited chan struct{}
	done   chan struct{} // closed when the supervising goroutine ends
}

// Start starts (or reuses) the processes in order, each Ready before the
// next. On error, those already started are stopped again. ctx bounds only
// the start; the daemons run until Stop.
func Start(ctx context.Context, procs []Process, opts Options) (*Supervisor, error) {
	opts.defaults()
	logger := klog.FromContext(ctx).WithName("supervisor")
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Supervisor{opts: opts, logger: logger, cancel: cancel, signal: (*os.Process).Signal}
	for _, p := range procs {
		if p.Running != nil && p.Running(ctx) {
			logger.Info("Reusing a running daemon", "daemon", p.Name)
			continue
		}
		r := &running{proc: p, done: make(chan struct{})}
		if err := s.startOnce(r); err != nil {
			s.Stop()
			return nil, fmt.Errorf("starting %s: %w", p.Name, err)
		}
		s.mu.Lock()
		s.running = append(s.running, r)
		s.mu.Unlock()
		go s.supervise(runCtx, r)
		if p.Ready != nil {
			if err := s.waitReady(ctx, r); err != nil {
				s.Stop()
				return nil, fmt.Errorf("%s did not become ready: %w", p.Name, err)
			}
		}
		logger.Info("Daemon started", "daemon", p.Name)
	}
	return s, nil
}

func (s *Supervisor) waitReady(ctx context.Context, r *running) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		last = r.proc.Ready(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return err
}

// startOnce starts the process; the caller supervises it.
func (s *Supervisor) startOnce(r *running) error {
	if r.proc.Prepare != nil {
		if err := r.proc.Prepare(); err != nil {
			return err
		}
	}
	cmd := exec.Command(r.proc.Path, r.proc.Args...) // #nosec G204 -- fixed daemons chosen by the binary
	// Through a pipe, as a container runtime gives them, even when Output is
	// a file: a daemon that opens /dev/stderr itself (Ganesha's -L) would
	// otherwise write at an offset of its own and overwrite our lines.
	out := struct{ io.Writer }{s.opts.Output}
	cmd.Stdout, cmd.Stderr = out, out
	// A daemon's exit is seen at once, as with a file, even if something it
	// left behind still holds the pipe.
	cmd.WaitDelay = time.Second
	// A process group of its own keeps a terminal's Ctrl-C to us alone (we
	// stop the daemons in order); the parent-death signal ends a daemon if
	// nfs-provisioner is killed without the chance to stop it (unless the
	// daemon switched users, which clears it: see Stop).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.logger.Info("Daemon exited", "daemon", r.proc.Name, "pid", cmd.Process.Pid, "status", exitStatus(err))
		close(exited)
	}()
	if s.opts.OnStart != nil {
		s.opts.OnStart(r.proc.Name, cmd.Process.Pid)
	}
	return nil
}

// supervise restarts the process each time it exits until ctx ends.
func (s *Supervisor) supervise(ctx context.Context, r *running) {
	defer close(r.done)
	backoff := s.opts.BackoffStart
	for {
		r.mu.Lock()
		exited, started := r.exited, time.Now()
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-exited:
		}
		if time.Since(started) > stableAfter {
			backoff = s.opts.BackoffStart
		}
		s.logger.Info("Restarting daemon", "daemon", r.proc.Name, "after", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.opts.BackoffMax)
		if err := s.startOnce(r); err != nil {
			s.logger.Error(err, "Restarting daemon failed", "daemon", r.proc.Name)
			// Keep the old, closed exited channel: the loop waits the backoff again.
			continue
		}
		s.restartDependents(r)
	}
}

// restartDependents stops the processes started after r; their supervising
// goroutines start them again, now that r runs.
func (s *Supervisor) restartDependents(r *running) {
	after := false
	for _, d := range s.started() {
		if d == r {
			after = true
			continue
		}
		if !after {
			continue
		}
		d.mu.Lock()
		cmd, exited := d.cmd, d.exited
		d.mu.Unlock()
		select {
		case <-exited:
		default:
			s.logger.Info("Restarting dependent daemon", "daemon", d.proc.Name, "dependsOn", r.proc.Name)
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
}

// Stop stops the processes started here, last started first: SIGTERM, then
// SIGKILL after the stop timeout. Daemons that were reused are left alone,
// and so is one that cannot be signaled: a daemon that switched to a user
// of its own (D-Bus runs as messagebus, rpcbind as _rpc) while the
// container lacks CAP_KILL. The kernel ends those when nfs-provisioner, the
// container's first process, exits; waiting for them would only hold the
// pod until its termination grace period ends and the kubelet kills it.
func (s *Supervisor) Stop() {
	s.cancel()
	procs := s.started()
	for i := len(procs) - 1; i >= 0; i-- {
		r := procs[i]
		<-r.done
		r.mu.Lock()
		cmd, exited := r.cmd, r.exited
		r.mu.Unlock()
		select {
		case <-exited:
			continue
		default:
		}
		if err := s.signal(cmd.Process, syscall.SIGTERM); err != nil {
			s.logger.Info("Cannot stop daemon, leaving it", "daemon", r.proc.Name, "err", err)
			continue
		}
		select {
		case <-exited:
		case <-time.After(s.opts.StopTimeout):
			s.logger.Info("Daemon did not stop in time, killing it", "daemon", r.proc.Name)
			if err := s.signal(cmd.Process, syscall.SIGKILL); err != nil {
				s.logger.Info("Cannot kill daemon, leaving it", "daemon", r.proc.Name, "err", err)
				continue
			}
			<-exited
		}
		s.logger.Info("Daemon stopped", "daemon", r.proc.Name)
	}
	s.mu.Lock()
	s.running = nil
	s.mu.Unlock()
}

// Pids returns the pid of each running process started here, by name.
func (s *Supervisor) Pids() map[string]int {
	out := map[string]int{}
	for _, r := range s.started() {
		r.mu.Lock()
		select {
		case <-r.exited:
		default:
			out[r.proc.Name] = r.cmd.Process.Pid
		}
		r.mu.Unlock()
	}
	return out
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit 0"
	case errors.As(err, &ee):
		return ee.String()
	default:
		return err.Error()
	}
}
