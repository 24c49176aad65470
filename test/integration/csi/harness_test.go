// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// testTimeout bounds each test.
	testTimeout = 3 * time.Minute
	// stopGrace is how long a stopped provisioner may take to exit.
	stopGrace = 20 * time.Second
	// journalNamespace holds the provisioners' in-flight journals.
	journalNamespace = "default"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	counter   atomic.Int64
)

// provisionerBinary builds csi-provisioner, with the race detector, once per
// package run into the user cache (go build is incremental) and returns its path.
func provisionerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = err
			return
		}
		dir := filepath.Join(cache, "kubeprov", "test-bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		module, err := filepath.Abs(filepath.Join("..", "..", "..", "csi"))
		if err != nil {
			buildErr = err
			return
		}
		// Build to a private name and rename: test runs in parallel share the dir.
		tmp := filepath.Join(dir, fmt.Sprintf("csi-provisioner.%d", os.Getpid()))
		cmd := exec.Command("go", "build", "-race", "-o", tmp, "./cmd/csi-provisioner")
		cmd.Dir = module
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building csi-provisioner: %w\n%s", err, out)
			return
		}
		binary = filepath.Join(dir, "csi-provisioner")
		buildErr = os.Rename(tmp, binary)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// uniqueName returns a name no other test of this run uses.
func uniqueName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", prefix, counter.Add(1), hex.EncodeToString(b))
}

// socketPath returns a unix socket path short enough for the 108-byte limit,
// which t.TempDir paths of long test names exceed.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

// env is one test's driver and provisioner.
type env struct {
	t      *testing.T
	ctx    context.Context
	name   string // driver name, also the provisioner name
	ns     string
	socket string
	driver *csidriver.Driver
	prov   *process
}

// setup starts a driver with opts (its Name is generated) and a provisioner
// with the extra flags args, and waits until the provisioner is ready.
func setup(t *testing.T, opts csidriver.Options, args ...string) *env {
	t.Helper()
	e := newEnv(t, opts)
	e.prov = e.startProvisioner(args...)
	if err := e.prov.waitReady(e.ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// newEnv starts only the driver.
func newEnv(t *testing.T, opts csidriver.Options) *env {
	t.Helper()
	opts.Name = uniqueName("csi") + ".test.kubeprov.io"
	e := &env{
		t: t, ctx: framework.TestContext(t, testTimeout), name: opts.Name,
		ns: cp.CreateTestNamespace(t, "csi"), socket: socketPath(t), driver: csidriver.New(opts),
	}
	if err := e.driver.Start(e.socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.driver.Stop)
	return e
}

// on returns the env for a subtest: helpers fail the test they run in.
func (e *env) on(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// process is a running csi-provisioner.
type process struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string
	addr string
	done chan struct{}
	err  error
}

// startProvisioner runs csi-provisioner for the env's driver with short
// retry intervals, metrics and health on a free port, and the extra flags.
func (e *env) startProvisioner(args ...string) *process {
	t := e.t
	t.Helper()
	p := &process{t: t, log: filepath.Join(t.TempDir(), fmt.Sprintf("csi-provisioner-%d.log", counter.Add(1))), addr: freeAddress(t), done: make(chan struct{})}
	all := append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--csi-address=" + e.socket,
		"--http-endpoint=" + p.addr,
		"--leader-election-namespace=" + journalNamespace,
		"--retry-interval-start=100ms",
		"--retry-interval-max=2s",
		// Failing claims retried every 2 s would otherwise exhaust the
		// default budget of 5 writes a second and delay the events tested.
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"-v=5",
	}, args...)
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(provisionerBinary(t), all...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if logs := p.logs(); strings.Contains(logs, "WARNING: DATA RACE") {
			t.Errorf("csi-provisioner found a data race:\n%s", logs)
		} else if t.Failed() {
			t.Logf("csi-provisioner log (%s), last lines:\n%s", p.log, tail(logs, 80))
		}
	})
	return p
}

// stop asks the provisioner to exit (SIGTERM) and kills it if it does not.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.t.Errorf("csi-provisioner did not exit within %v of SIGTERM", stopGrace)
		p.kill()
	}
}

// kill ends the provisioner at once, as a crash or an OOM kill would.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// wait returns the provisioner's exit error once it exits.
func (p *process) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("csi-provisioner still running: %w", ctx.Err())
	}
}

func (p *process) logs() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// readyz returns the status code and body of /readyz?verbose.
func (p *process) readyz(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/readyz?verbose", nil)
	if err != nil {
		return 0, "", err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = rsp.Body.Close() }()
	body, err := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(body), err
}

// waitReadiness waits until /readyz answers ready (or not ready).
func (p *process) waitReadiness(ctx context.Context, ready bool) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("csi-provisioner exited: %w", p.err)
		default:
		}
		code, body, err := p.readyz(ctx)
		last = fmt.Sprintf("%d %s %v", code, body, err)
		return err == nil && (code == http.StatusOK) == ready, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for /readyz to be ready=%v: %w (last answer: %s)", ready, err, last)
	}
	return nil
}

func (p *process) waitReady(ctx context.Context) error { return p.waitReadiness(ctx, true) }

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// createClass creates a StorageClass of the env's driver and deletes it
// when the test ends.
func (e *env) createClass(params map[string]string, mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	e.t.Helper()
	class := framework.NewStorageClass(uniqueName("csi"), e.name, params)
	for _, m := range mutate {
		m(class)
	}
	class, err := cp.Client.StorageV1().StorageClasses().Create(e.ctx, class, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cp.Client.StorageV1().StorageClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	return class
}

// createClaim creates a claim of the class in the env's namespace.
func (e *env) createClaim(class, size string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	claim := framework.NewPVC(e.ns, uniqueName("claim"), class, size)
	for _, m := range mutate {
		m(claim)
	}
	claim, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return claim
}

// bound waits until the claim is bound and returns it with its PV.
func (e *env) bound(claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	e.t.Helper()
	claim, pv, err := framework.WaitForPVCBound(e.ctx, cp.Client, claim.Namespace, claim.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	return claim, pv
}

// deleteClaim deletes a claim and waits until it is gone.
func (e *env) deleteClaim(claim *corev1.PersistentVolumeClaim) {
	e.t.Helper()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(e.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := framework.WaitForPVCDeleted(e.ctx, cp.Client, claim.Namespace, claim.Name); err != nil {
		e.t.Fatal(err)
	}
}

// event waits for an event about obj with the reason whose message contains
// every one of parts, and returns it.
func (e *env) event(obj metav1.Object, reason string, parts ...string) *corev1.Event {
	e.t.Helper()
	ev, err := waitForEvent(e.ctx, obj, reason, parts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func waitForEvent(ctx context.Context, obj metav1.Object, reason string, parts ...string) (*corev1.Event, error) {
	var found *corev1.Event
	var seen []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for i, ev := range list.Items {
			if ev.InvolvedObject.UID != obj.GetUID() {
				continue
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
			if ev.Reason == reason && containsAll(ev.Message, parts) {
				found = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no %s event about %s containing %q: %w; events seen:\n%s", reason, obj.GetName(), parts, err, strings.Join(seen, "\n"))
	}
	return found, nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// eventually waits until cond holds.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	err := wait.PollUntilContextCancel(e.ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// volumeCount is how many volumes the driver holds.
func (e *env) volumeCount() int { return len(e.driver.Volumes()) }

// noVolumeLeft waits until the driver holds no volume: every asset was deleted.
func (e *env) noVolumeLeft() {
	e.t.Helper()
	e.eventually("the driver to hold no volume", func() bool { return e.volumeCount() == 0 })
}

// pvName is the PV (and volume) name of a claim with the default flags.
func pvName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

// pvGone waits until the PV is deleted.
func (e *env) pvGone(name string) {
	e.t.Helper()
	if err := framework.WaitForPVDeleted(e.ctx, cp.Client, name); err != nil {
		e.t.Fatal(err)
	}
}

// pvAbsent reports whether no PV has the name right now.
func pvAbsent(ctx context.Context, name string) (bool, error) {
	_, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
