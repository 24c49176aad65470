// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
)

// script writes an executable shell script into a temporary directory.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "driver")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExecLauncherPassesActionAndInput(t *testing.T) {
	dir := t.TempDir()
	l := &ExecLauncher{Driver: script(t, `printf '%s' "$1" >`+dir+`/action; printf '%s' "$2" >`+dir+`/input; echo '{"status": "Success"}'`)}
	in := Input{"a": "b c", KeyPVName: "pvc-1"}
	res, _, err := l.Provision(t.Context(), &Call{Input: in})
	if err != nil || res.Output.Status != StatusSuccess {
		t.Fatalf("Provision = %+v, %v", res, err)
	}
	action, _ := os.ReadFile(filepath.Join(dir, "action"))
	got, _ := os.ReadFile(filepath.Join(dir, "input"))
	if string(action) != "provision" || string(got) != in.JSON() {
		t.Errorf("driver got %q %q", action, got)
	}
	if err := l.Delete(t.Context(), &Call{Input: in}); err != nil {
		t.Fatal(err)
	}
	if action, _ := os.ReadFile(filepath.Join(dir, "action")); string(action) != "delete" {
		t.Errorf("delete ran %q", action)
	}
}

func TestExecLauncherFailures(t *testing.T) {
	noisy := `i=0; while [ $i -lt 100 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "the real cause" >&2; `
	for _, tc := range []struct {
		name, body string
		want       []string
		unknown    bool // the driver may have created something
		notSupp    bool
	}{
		{name: "failure with stderr tail", body: noisy + `echo '{"status": "Failure", "message": "no space"}'; exit 1`,
			want: []string{"failed: Failure: no space", "(stderr: (truncated)...", "the real cause)"}},
		{name: "not supported", body: `echo '{"status": "Not supported", "message": "read-only backend"}'`,
			want: []string{`("Not supported"): read-only backend`}, notSupp: true},
		{name: "garbage with exit 0", body: `echo 'all good'`, want: []string{"driver printed invalid JSON", "all good"}, unknown: true},
		{name: "garbage with exit 3", body: `echo 'oops' >&2; exit 3`, want: []string{"exited with code 3: driver printed nothing", "(stderr: oops)"}},
		{name: "success with exit 1", body: `echo '{"status": "Success"}'; exit 1`, want: []string{`printed status "Success" but exited with code 1`}, unknown: true},
		{name: "too much output", body: `head -c 2000000 /dev/zero | tr '\0' x`, want: []string{"printed more than 1048576 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &ExecLauncher{Driver: script(t, tc.body)}
			_, state, err := l.Provision(t.Context(), &Call{Input: Input{}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if state != controller.ProvisioningFinished || isUnknownOutcome(err) != tc.unknown || errors.Is(err, ErrNotSupported) != tc.notSupp {
				t.Errorf("state %s, unknown outcome %v, not supported %v", state, isUnknownOutcome(err), errors.Is(err, ErrNotSupported))
			}
		})
	}
}

func TestExecLauncherMissingDriver(t *testing.T) {
	l := &ExecLauncher{Driver: filepath.Join(t.TempDir(), "nope")}
	_, state, err := l.Provision(t.Context(), &Call{Input: Input{}})
	if err == nil || !strings.Contains(err.Error(), "could not start") || state != controller.ProvisioningFinished {
		t.Errorf("err = %v, state %s", err, state)
	}
}

// The timeout kills the driver's whole process group, and the outcome is
// unknown: provisioning continues in the background.
func TestExecLauncherTimeoutKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	l := &ExecLauncher{Driver: script(t, `sleep 60 & echo $! >`+pidFile+`; wait`), Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, state, err := l.Provision(t.Context(), &Call{Input: Input{}})
	if state != controller.ProvisioningInBackground || !errors.Is(err, errTimedOut) || !strings.Contains(err.Error(), "--driver-timeout 300ms") {
		t.Fatalf("state %s, err %v", state, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: the kill did not reach the driver", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return syscall.Kill(pid, 0) == syscall.ESRCH, nil
	}); err != nil {
		t.Errorf("child %d of the driver survived", pid)
	}
}

func TestExecLauncherInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	started := filepath.Join(t.TempDir(), "started")
	l := &ExecLauncher{Driver: script(t, `touch `+started+`; sleep 60`)}
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			_, err := os.Stat(started)
			return err == nil, nil
		})
		cancel()
	}()
	_, state, err := l.Provision(ctx, &Call{Input: Input{}})
	if state != controller.ProvisioningInBackground || !errors.Is(err, errInterrupted) {
		t.Errorf("state %s, err %v", state, err)
	}
}

func TestExecLauncherDeleteNotSupported(t *testing.T) {
	l := &ExecLauncher{Driver: script(t, `echo '{"status": "Not supported"}'`)}
	err := l.Delete(t.Context(), &Call{Input: Input{}})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "delete the asset by hand") {
		t.Errorf("err = %v", err)
	}
}
