// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// controlPlaneScript is the build script for etcd, kube-apiserver and
// kube-controller-manager, relative to the repository root.
const controlPlaneScript = "hack/controlplane.sh"

// Binaries Start needs in the directory EnsureBinaries returns.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// EnsureBinaries builds (or, when warm, only checks) the control plane binaries with
// hack/controlplane.sh and returns the directory that holds them. The script is
// found by walking up from the working directory to the first directory holding
// go.work or hack/controlplane.sh. Its output is streamed line by line to log, which
// may be nil.
//
// A cold build takes 10-15 minutes on two cores; a warm run about a second. Test
// packages running in parallel share one build: the script runs under an exclusive
// file lock next to the binaries.
func EnsureBinaries(ctx context.Context, log func(string, ...any)) (string, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	root, err := findRepoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, controlPlaneScript)

	out, err := exec.CommandContext(ctx, "bash", script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("asking %s for its binary directory: %w", script, err)
	}
	binDir := strings.TrimSpace(string(out))
	if binDir == "" {
		return "", fmt.Errorf("%s --print-dir printed nothing", script)
	}

	// Two test binaries (go test runs packages in parallel) must not both start a
	// cold build: the second would redo 15 minutes of work and race on the outputs.
	unlock, err := LockFile(ctx, filepath.Dir(binDir), filepath.Base(binDir)+".lock")
	if err != nil {
		return "", fmt.Errorf("waiting for another control plane build: %w", err)
	}
	defer unlock()

	if err := runStreaming(ctx, root, log, "bash", script); err != nil {
		return "", fmt.Errorf("building the control plane with %s: %w", script, err)
	}
	for _, name := range requiredBinaries {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return "", fmt.Errorf("%s succeeded but %s is missing: %w", script, name, err)
		}
	}
	return binDir, nil
}

// findRepoRoot walks up from the working directory to the directory that holds
// go.work or hack/controlplane.sh.
func findRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, marker := range []string{"go.work", controlPlaneScript} {
			if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
				if _, err := os.Stat(filepath.Join(dir, controlPlaneScript)); err != nil {
					return "", fmt.Errorf("found %s in %s but no %s next to it", marker, dir, controlPlaneScript)
				}
				return dir, nil
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("no directory above %s holds go.work or %s; run from inside the repository", wd, controlPlaneScript)
		}
	}
}

// LockFile takes an exclusive flock on dir/name, creating both if needed, and
// returns the function that releases it. It gives up when ctx is done. Each
// call opens the file anew and flock locks belong to an open file: the lock
// excludes other callers in this process as it does other processes (such as
// the test binaries of other packages, which go test runs at once).
func LockFile(ctx context.Context, dir, name string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	locked := make(chan error, 1)
	go func() { locked <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-locked:
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		return func() { _ = f.Close() }, nil // closing the file releases the lock
	case <-ctx.Done():
		// Closing the descriptor does not interrupt a blocked flock; the goroutine
		// ends when the other holder releases it, and the lock dies with the file.
		go func() {
			<-locked //nolint:errcheck // whatever flock answered, the file goes
			_ = f.Close()
		}()
		return nil, fmt.Errorf("waiting for the lock %s: %w", f.Name(), ctx.Err())
	}
}

// RunStreaming runs a command (such as a build script) in dir and hands each
// line of its combined output to log as it comes, so that a long build shows
// progress. On failure the error carries the last lines of output. Canceling
// ctx stops the command's whole process group.
func RunStreaming(ctx context.Context, dir string, log func(string, ...any), name string, args ...string) error {
	return runStreaming(ctx, dir, log, name, args...)
}

func runStreaming(ctx context.Context, dir string, log func(string, ...any), name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// The script's go build runs in the script's process group; canceling must stop
	// the whole group (which we created) or the compiler keeps running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw

	tail := newTailBuffer(20)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			log("%s", sc.Text())
			tail.add(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr) // keep draining after an over-long line
	}()

	err := cmd.Run()
	_ = pw.Close()
	wg.Wait()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) || ctx.Err() != nil {
			return fmt.Errorf("%w; last output:\n%s", err, tail)
		}
		return err
	}
	return nil
}

// tailBuffer keeps the last n lines written to it.
type tailBuffer struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// LogTail returns the last n lines of a log file, for error messages.
func LogTail(path string, n int) string { return fileTail(path, n) }

// fileTail returns the last n lines of a log file, for error messages.
func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
