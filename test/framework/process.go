// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// processStopTimeout is how long a provisioner gets to exit after SIGTERM; it
// releases its Lease and finishes running operations first.
const processStopTimeout = 15 * time.Second

// unsafeInName matches what must not go into a file name made of build flags.
var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9._=-]+`)

// RepoRoot is the repository's root directory: the nearest directory at or
// above the working directory that holds go.work or hack/controlplane.sh.
func RepoRoot() (string, error) { return findRepoRoot() }

// BuildBinary compiles <repo>/<module>/cmd/<binary> with go build's
// buildFlags (such as -race) and returns its path. The binary lives in a
// cache directory ($KUBEPROV_CACHE, by default ~/.cache/kubeprov, like the
// control plane's), one directory per checkout, because go build skips
// relinking an output that is up to date: a warm build takes a second
// instead of ten. Each set of build flags
// has an output of its own, so that callers with different flags do not
// relink each other's. Test packages run in parallel share one build
// through a file lock.
func BuildBinary(ctx context.Context, module, binary string, buildFlags ...string) (string, error) {
	return buildBinary(ctx, nil, module, binary, buildFlags)
}

// BuildStandaloneBinary is BuildBinary for a module outside go.work, such as
// a third party's provisioner (test/ports): it is built with GOWORK=off, from
// its own go.mod alone, as its authors build it.
func BuildStandaloneBinary(ctx context.Context, module, binary string, buildFlags ...string) (string, error) {
	return buildBinary(ctx, []string{"GOWORK=off"}, module, binary, buildFlags)
}

func buildBinary(ctx context.Context, env []string, module, binary string, buildFlags []string) (string, error) {
	root, err := findRepoRoot()
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
	// One directory per checkout: two checkouts (worktrees, a CI clone)
	// testing at once must not relink each other's binaries mid-run.
	dir = filepath.Join(dir, "bin", fmt.Sprintf("%x", sha256.Sum256([]byte(root)))[:12])
	// csi-provisioner with -race is csi-provisioner-race.
	name := binary + unsafeInName.ReplaceAllString(strings.Join(buildFlags, ""), "_")
	unlock, err := LockFile(ctx, dir, name+".lock")
	if err != nil {
		return "", fmt.Errorf("waiting for another build of %s: %w", name, err)
	}
	defer unlock()
	bin := filepath.Join(dir, name)
	args := slices.Concat([]string{"build", "-o", bin}, buildFlags, []string{"./cmd/" + binary})
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, module)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in %s: %w\n%s", binary, cmd.Dir, err, out)
	}
	return bin, nil
}

// ProcessOptions describe a child process: a provisioner binary or a
// backend daemon.
type ProcessOptions struct {
	// Binary is the executable's path.
	Binary string
	// Args are its arguments. Unless NoEndpoint is set, StartProcess adds
	// --http-endpoint on a free loopback port and waits for its /readyz.
	Args []string
	// Env is added to this process's environment.
	Env []string
	// NoInheritEnv: Env is the whole environment, none of this process's is
	// inherited; for a process that runs as another user, whom this
	// process's HOME or TMPDIR would not suit.
	NoInheritEnv bool
	// Dir is its working directory; by default this process's.
	Dir string
	// Credential runs it as another user (this process must be root).
	Credential *syscall.Credential
	// ProcessGroup runs it in a process group of its own, for a daemon that
	// forks workers or helpers: Stop and Kill signal the whole group, and
	// kill what is left of it once the process has exited.
	ProcessGroup bool
	// LogPath receives its standard output and error.
	LogPath string
	// NoEndpoint: the process serves no /readyz and gets no
	// --http-endpoint; unless Ready is set, StartProcess returns once it has
	// started.
	NoEndpoint bool
	// Ready, if set, tells whether the process is ready (a nil error) in
	// place of its /readyz: for a daemon that is ready once it answers its
	// own protocol.
	Ready func(ctx context.Context) error
	// NoWait: StartProcess returns once the process has started, for a
	// process that is not to be ready yet (or ever); WaitReady waits for it
	// later.
	NoWait bool
	// ReadyTimeout bounds the wait for readiness (default one minute).
	ReadyTimeout time.Duration
}

// Process is a running child process.
type Process struct {
	// Name is the binary's base name, for messages.
	Name string
	// LogPath holds its standard output and error.
	LogPath string
	// Endpoint is its --http-endpoint (host:port), empty with NoEndpoint.
	Endpoint string

	cmd    *exec.Cmd
	ready  func(context.Context) error // ProcessOptions.Ready
	group  bool                        // ProcessOptions.ProcessGroup
	done   chan struct{}
	err    error // set before done is closed
	killed bool  // by Kill: its exit status is no failure
}

// StartProcess runs a child process as opts say and, unless opts.NoWait or
// opts.NoEndpoint without opts.Ready, returns once it is ready.
func StartProcess(ctx context.Context, opts ProcessOptions) (*Process, error) {
	p := &Process{
		Name:    filepath.Base(opts.Binary),
		LogPath: opts.LogPath,
		ready:   opts.Ready,
		group:   opts.ProcessGroup,
		done:    make(chan struct{}),
	}
	args := opts.Args
	if !opts.NoEndpoint {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		p.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args = slices.Concat(args, []string{"--http-endpoint=" + p.Endpoint})
	}
	logFile, err := os.Create(opts.LogPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	p.cmd = exec.Command(opts.Binary, args...)
	p.cmd.Dir = opts.Dir
	if opts.NoInheritEnv {
		p.cmd.Env = append([]string{}, opts.Env...) // not nil: nil inherits
	} else {
		p.cmd.Env = append(os.Environ(), opts.Env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// If the test binary dies (a panic, go test's timeout), its children go
	// with it instead of running on and holding ports and storage.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: opts.ProcessGroup, Credential: opts.Credential, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if opts.NoWait || (opts.NoEndpoint && opts.Ready == nil) {
		return p, nil
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	if err := p.WaitReady(ctx, timeout); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Ready reports whether the process is ready: ProcessOptions.Ready answers
// nil or, without it, /readyz answers 200.
func (p *Process) Ready(ctx context.Context) bool { return p.checkReady(ctx) == nil }

// checkReady is why the process is not ready, nil when it is.
func (p *Process) checkReady(ctx context.Context) error {
	if p.ready != nil {
		return p.ready(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Endpoint+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// WaitReady polls until the process is ready (see Ready), it exits or the
// timeout passes.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			last = nil // the exit says more
			return false, fmt.Errorf("%s exited: %w", p.Name, cmp.Or(p.err, errors.New("exit status 0")))
		default:
		}
		last = p.checkReady(ctx)
		return last == nil, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last answer: %w)", err, last)
		}
		return fmt.Errorf("waiting for %s (pid %d) to be ready: %w\nlog tail:\n%s", p.Name, p.Pid(), err, p.LogTail(20))
	}
	return nil
}

// Stop sends SIGTERM and waits for the exit, then SIGKILL after a grace
// period. It returns an error if the process did not exit cleanly, now or
// earlier (a crash), unless Kill stopped it; calling it again is harmless.
func (p *Process) Stop() error {
	defer p.killGroup()
	select {
	case <-p.done:
		if p.killed {
			return nil
		}
		return p.exitError()
	default:
	}
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitError()
	case <-time.After(processStopTimeout):
		_ = p.Kill()
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for %v and was killed", p.Name, p.Pid(), processStopTimeout)
	}
}

// Kill stops the process at once (SIGKILL), as a crash or a node failure
// would.
func (p *Process) Kill() error {
	defer p.killGroup()
	select {
	case <-p.done:
		return nil
	default:
	}
	p.killed = true
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	<-p.done
	return nil
}

// signal sends sig to the process, or to its process group.
func (p *Process) signal(sig syscall.Signal) error {
	if p.group {
		return syscall.Kill(-p.Pid(), sig)
	}
	return p.cmd.Process.Signal(sig)
}

// killGroup kills what is left of the process group once Stop or Kill is
// done (children that ignore SIGTERM or outlived a crash): they must not
// outlive the test.
func (p *Process) killGroup() {
	if p.group {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	}
}

func (p *Process) exitError() error {
	if p.err != nil {
		return fmt.Errorf("%s (pid %d) exited: %w\nlog tail:\n%s", p.Name, p.Pid(), p.err, p.LogTail(20))
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
func (p *Process) LogTail(n int) string { return fileTail(p.LogPath, n) }

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
		return fmt.Errorf("waiting for a log line of %s (pid %d) with %q: %w\nlog tail:\n%s", p.Name, p.Pid(), parts, err, p.LogTail(20))
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
