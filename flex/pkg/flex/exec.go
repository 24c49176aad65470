// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
)

// Defaults of the exec launcher.
const (
	// DefaultDriverTimeout bounds one driver run (exec) or one pod's
	// activeDeadlineSeconds (container).
	DefaultDriverTimeout = 2 * time.Minute
	// maxStdoutBytes bounds what is kept of a driver's stdout: an answer is small.
	maxStdoutBytes = 1 << 20
	// maxStderrBytes bounds what is kept of a driver's stderr (its tail).
	maxStderrBytes = 64 << 10
	// pipeWaitDelay bounds the wait for a killed driver's pipes, which
	// background children it started may hold open.
	pipeWaitDelay = 5 * time.Second
)

// ExecLauncher runs an executable shipped in the provisioner's image:
// `<driver> provision <input JSON>` and `<driver> delete <input JSON>`, each
// in a process group of its own that is killed when Timeout passes.
type ExecLauncher struct {
	// Driver is the executable's path.
	Driver string
	// Timeout bounds one run; 0 means DefaultDriverTimeout.
	Timeout time.Duration
}

var _ Launcher = &ExecLauncher{}

// Name implements Launcher.
func (l *ExecLauncher) Name() string { return "exec" }

// errTimedOut marks a driver killed at the timeout, errInterrupted one
// killed because the operation's context ended.
var (
	errTimedOut    = errors.New("timed out")
	errInterrupted = errors.New("interrupted")
)

// Provision implements Launcher. A driver killed at the timeout may have
// created something, so that failure is ProvisioningInBackground: the
// controller calls Provision again (drivers must be idempotent) until it
// answers, and deletes the asset if the claim is gone by then.
func (l *ExecLauncher) Provision(ctx context.Context, call *Call) (*Result, controller.ProvisioningState, error) {
	out, err := l.run(ctx, ActionProvision, call.Input)
	if errors.Is(err, errTimedOut) || errors.Is(err, errInterrupted) {
		return nil, controller.ProvisioningInBackground, err
	}
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return &Result{Output: out}, controller.ProvisioningFinished, nil
}

// Delete implements Launcher.
func (l *ExecLauncher) Delete(ctx context.Context, call *Call) error {
	_, err := l.run(ctx, ActionDelete, call.Input)
	if errors.Is(err, ErrNotSupported) {
		return fmt.Errorf("%w: delete the asset by hand and then the PV, or use reclaimPolicy Retain for this StorageClass", err)
	}
	return err
}

func (l *ExecLauncher) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return DefaultDriverTimeout
}

// run runs the driver once and returns its successful output.
func (l *ExecLauncher) run(ctx context.Context, action string, in Input) (*Output, error) {
	logger := klog.FromContext(ctx)
	timeout := l.timeout()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The driver is the admin's --driver; the input is one argument, never a shell.
	cmd := exec.CommandContext(runCtx, l.Driver, action, in.JSON()) //nolint:gosec // G204: see above
	// Its own process group, so that the kill reaches whatever the driver
	// started (a script's sleep, a CLI's helper).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = pipeWaitDelay
	stdout := &limitedBuffer{max: maxStdoutBytes}
	stderr := &limitedBuffer{max: maxStderrBytes, keepTail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	logger.V(4).Info("Running driver", "driver", l.Driver, "action", action)
	runErr := cmd.Run()
	logger.V(2).Info("Driver finished", "driver", l.Driver, "action", action, "duration", time.Since(start), "err", runErr)

	what := fmt.Sprintf("driver %s %s", l.Driver, action)
	errText := stderrSuffix(stderr.String())
	if runCtx.Err() != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s was %w and killed because the operation ended (--timeout): it will run again%s", what, errInterrupted, errText)
		}
		return nil, fmt.Errorf("%s %w: it did not finish within --driver-timeout %v and was killed with its process group; it will run again, so it must be idempotent%s",
			what, errTimedOut, timeout, errText)
	}
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		if errors.Is(runErr, os.ErrNotExist) || errors.Is(runErr, os.ErrPermission) {
			return nil, fmt.Errorf("%s could not start: %w: check --driver and the file's execute permission", what, runErr)
		}
		return nil, fmt.Errorf("%s could not run: %w%s", what, runErr, errText)
	}
	if stdout.truncated {
		return nil, fmt.Errorf("%s printed more than %d bytes; expected one JSON answer%s", what, maxStdoutBytes, errText)
	}
	out, perr := ParseOutput(stdout.Bytes())
	if perr != nil {
		if exitErr != nil {
			return nil, fmt.Errorf("%s exited with code %d: %w%s", what, exitErr.ExitCode(), perr, errText)
		}
		return nil, unknownOutcome{fmt.Errorf("%s: %w%s", what, perr, errText)}
	}
	if err := out.Err(); err != nil {
		return nil, fmt.Errorf("%s failed: %w%s", what, err, errText)
	}
	if exitErr != nil {
		return nil, unknownOutcome{fmt.Errorf("%s printed status %q but exited with code %d%s", what, out.Status, exitErr.ExitCode(), errText)}
	}
	return out, nil
}

// stderrSuffix quotes the tail of a driver's stderr for an error.
func stderrSuffix(s string) string {
	s = truncateTail(s)
	if s == "" {
		return ""
	}
	return " (stderr: " + s + ")"
}

// truncateTail keeps the last MaxMessageBytes of s: a failing program's last
// lines usually say why.
func truncateTail(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := len(s) - MaxMessageBytes
	for cut < len(s) && (s[cut]&0xC0) == 0x80 {
		cut++
	}
	return "(truncated)..." + s[cut:]
}

// limitedBuffer keeps at most max bytes: the head, or with keepTail the tail.
type limitedBuffer struct {
	mu        sync.Mutex
	buf       []byte
	max       int
	keepTail  bool
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.truncated = true
		if b.keepTail {
			b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
		} else {
			b.buf = b.buf[:b.max]
		}
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

func (b *limitedBuffer) String() string { return string(b.Bytes()) }
