// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

func sh(name, script string) Process {
	return Process{Name: name, Path: "sh", Args: []string{"-c", script}}
}

// started collects OnStart calls.
type started chan string

func (s started) hook(name string, _ int) { s <- name }

func (s started) next(t *testing.T) string {
	t.Helper()
	select {
	case n := <-s:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no start within 30s")
		return ""
	}
}

func TestRestartsAProcessThatExits(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	starts := make(started, 100)
	s, err := Start(ctx, []Process{sh("flaky", "exit 3")}, Options{
		BackoffStart: time.Millisecond, BackoffMax: 5 * time.Millisecond, Output: io.Discard, OnStart: starts.hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n := starts.next(t); n != "flaky" {
			t.Fatalf("started %q", n)
		}
	}
	s.Stop()
}

func TestRestartsDependentsOfARestartedDaemon(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	starts := make(started, 10)
	s, err := Start(ctx, []Process{sh("bus", "exec sleep 1000"), sh("ganesha", "exec sleep 1000")}, Options{
		BackoffStart: time.Millisecond, Output: io.Discard, OnStart: starts.hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	starts.next(t)
	starts.next(t)
	if err := syscall.Kill(s.Pids()["bus"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if n := starts.next(t); n != "bus" {
		t.Fatalf("restarted %q first, want bus", n)
	}
	if n := starts.next(t); n != "ganesha" {
		t.Fatalf("then restarted %q, want ganesha (it depends on bus)", n)
	}
}

func TestReusesRunningDaemon(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	starts := make(started, 10)
	p := sh("rpcbind", "exit 0")
	p.Running = func(context.Context) bool { return true }
	s, err := Start(ctx, []Process{p}, Options{Output: io.Discard, OnStart: starts.hook})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if len(starts) != 0 || len(s.Pids()) != 0 {
		t.Errorf("a running daemon was started again")
	}
}

func TestStopsInReverseOrder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	log := filepath.Join(t.TempDir(), "log")
	daemon := func(name string) Process {
		p := sh(name, `sleep 1000 & trap 'kill $!; echo `+name+` >> `+log+`; exit 0' TERM; echo up > `+log+`.`+name+`; wait`)
		p.Ready = func(context.Context) error {
			_, err := os.Stat(log + "." + name)
			return err
		}
		return p
	}
	s, err := Start(ctx, []Process{daemon("first"), daemon("second")}, Options{Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	pids := s.Pids()
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	s.Stop()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "second first" {
		t.Errorf("stop order %v, want second first", got)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("%s (%d) still runs", name, pid)
		}
	}
}

func TestKillsADaemonThatIgnoresTERM(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ready := filepath.Join(t.TempDir(), "ready")
	p := sh("stubborn", `trap '' TERM; touch `+ready+`; while :; do sleep 0.05; done`)
	p.Ready = func(context.Context) error { _, err := os.Stat(ready); return err }
	s, err := Start(ctx, []Process{p}, Options{Output: io.Discard, StopTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.Pids()["stubborn"]
	s.Stop()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("stubborn daemon %d still runs", pid)
	}
}

// A daemon that switched to a user of its own cannot be signaled without
// CAP_KILL (D-Bus and rpcbind in the nfs server's container): Stop moves on
// instead of waiting for it.
func TestStopLeavesADaemonItCannotSignal(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s, err := Start(ctx, []Process{sh("other-user", "exec sleep 1000")}, Options{Output: io.Discard, StopTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.Pids()["other-user"]
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	s.signal = func(*os.Process, os.Signal) error { return os.ErrPermission }
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop waits for a daemon it cannot signal")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the daemon %d is gone (%v), though it could not be signaled", pid, err)
	}
}

func TestStartFailsAndCleansUpWhenNotReady(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	starts := make(chan int, 10)
	first := sh("first", "exec sleep 1000")
	never := sh("never", "exec sleep 1000")
	never.Ready = func(context.Context) error { return errors.New("not listening") }
	_, err := Start(ctx, []Process{first, never}, Options{
		Output: io.Discard, ReadyTimeout: 300 * time.Millisecond,
		OnStart: func(_ string, pid int) { starts <- pid },
	})
	if err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Fatalf("Start = %v; want the readiness error", err)
	}
	close(starts)
	for pid := range starts {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d left running after a failed Start", pid)
		}
	}
	if _, err := Start(ctx, []Process{{Name: "missing", Path: "/nonexistent/daemon"}}, Options{Output: io.Discard}); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
}
