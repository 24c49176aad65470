// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostpath holds the integration tests of the hostpath provisioner
// and the helpers, shared with `make demo`, that build its binary and run it
// as a child process.
package hostpath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// BinaryName is the provisioner's binary.
const BinaryName = "hostpath-provisioner"

// stopTimeout is how long a provisioner gets to exit after SIGTERM; it
// releases its Lease and finishes running operations first.
const stopTimeout = 15 * time.Second

// RepoRoot is the repository's root directory: the nearest directory at or
// above the working directory that holds hostpath/go.mod.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hostpath", "go.mod")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no directory above %s holds hostpath/go.mod: run from inside the repository", wd)
		}
	}
}

// Build compiles hostpath-provisioner from this repository and returns its
// path. The binary lives in a cache directory (like the control plane's:
// $KUBEPROV_CACHE, by default ~/.cache/kubeprov) because go build skips
// relinking an output that is up to date: a warm build takes a second
// instead of ten.
func Build(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := os.Getenv("KUBEPROV_CACHE")
	if dir == "" {
		if dir, err = os.UserCacheDir(); err != nil {
			return "", err
		}
		dir = filepath.Join(dir, "kubeprov")
	}
	dir = filepath.Join(dir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Test packages run in parallel may build at the same time.
	lock, err := os.OpenFile(filepath.Join(dir, BinaryName+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, BinaryName)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+BinaryName)
	cmd.Dir = filepath.Join(root, "hostpath")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in %s: %w\n%s", BinaryName, cmd.Dir, err, out)
	}
	return bin, nil
}

// Process is a running provisioner.
type Process struct {
	// LogPath holds its standard output and error.
	LogPath string
	// Endpoint is its --http-endpoint (host:port).
	Endpoint string

	cmd    *exec.Cmd
	done   chan struct{}
	err    error // set before done is closed
	killed bool  // by Kill: its exit status is no failure
}

// Start runs binary with args and env (added to this process's environment)
// and an --http-endpoint on a free loopback port, writing its output to
// logPath, and returns once its /readyz answers ok.
func Start(ctx context.Context, binary, logPath string, env []string, args ...string) (*Process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(binary, slices.Concat(args, []string{"--http-endpoint=" + endpoint})...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{LogPath: logPath, Endpoint: endpoint, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// waitReady polls /readyz until it answers 200 or the process exits.
func (p *Process) waitReady(ctx context.Context) error {
	url := "http://" + p.Endpoint + "/readyz"
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("%s exited: %w", BinaryName, p.err)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s (pid %d) to be ready: %w\nlog tail:\n%s", BinaryName, p.Pid(), err, p.LogTail(20))
	}
	return nil
}

// Stop sends SIGTERM and waits for the exit, then SIGKILL after a grace
// period. It returns an error if the process did not exit cleanly, now or
// earlier (a crash), unless Kill stopped it; calling it again is harmless.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		if p.killed {
			return nil
		}
		return p.exitError()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitError()
	case <-time.After(stopTimeout):
		_ = p.Kill()
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for %v and was killed", BinaryName, p.Pid(), stopTimeout)
	}
}

// Kill stops the process at once, as a crash or a node failure would.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

func (p *Process) exitError() error {
	if p.err != nil {
		return fmt.Errorf("%s (pid %d) exited: %w\nlog tail:\n%s", BinaryName, p.Pid(), p.err, p.LogTail(20))
	}
	return nil
}

// Log is everything the process wrote so far.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	return string(b)
}

// LogTail is the last n lines of Log.
func (p *Process) LogTail(n int) string {
	lines := bytes.Split(bytes.TrimRight([]byte(p.Log()), "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}

// HasLog reports whether a line of the log contains every one of parts.
func (p *Process) HasLog(parts ...string) bool {
	for line := range strings.Lines(p.Log()) {
		if containsAll(line, parts) {
			return true
		}
	}
	return false
}

// WaitForLog waits until a line of the log contains every one of parts.
func (p *Process) WaitForLog(ctx context.Context, parts ...string) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return p.HasLog(parts...), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for a log line of %s (pid %d) with %q: %w\nlog tail:\n%s", BinaryName, p.Pid(), parts, err, p.LogTail(20))
	}
	return nil
}

func containsAll(s string, parts []string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
