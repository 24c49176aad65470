// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// loopback is where Ganesha listens and what PVs name as server.
	loopback = "127.0.0.1"
	// stopTimeout bounds a graceful stop of the provisioner and its daemons.
	stopTimeout = 30 * time.Second
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds nfs-provisioner once per test run into the user cache (go
// build is incremental there) and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = err
			return
		}
		dir := filepath.Join(cache, "kubeprov", "nfs-test")
		if buildErr = os.MkdirAll(dir, 0o755); buildErr != nil {
			return
		}
		binPath = filepath.Join(dir, "nfs-provisioner")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/nfs-provisioner")
		cmd.Dir = filepath.Join(repoRoot(t), "nfs")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build nfs-provisioner: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running nfs-provisioner.
type proc struct {
	args    []string
	env     []string
	log     string
	healthz string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// startProc runs nfs-provisioner with args (plus the kubeconfig, fast
// retries and a health endpoint) and env, waits until /readyz answers 200,
// and stops it when the test ends, printing its log if the test failed.
func startProc(t *testing.T, args, env []string) *proc {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(loopback, strconv.Itoa(port))
	p := &proc{
		args: append([]string{
			"--kubeconfig=" + cp.KubeconfigPath,
			"--http-endpoint=" + addr,
			"--retry-interval-start=200ms",
			"--retry-interval-max=2s",
			"-v=4",
		}, args...),
		env:     env,
		log:     filepath.Join(t.TempDir(), "nfs-provisioner.log"),
		healthz: "http://" + addr + "/readyz",
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("nfs-provisioner log (%s):\n%s", p.log, tail(string(b), 80))
		}
	})
	p.start(t)
	return p
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(binary(t), p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	ctx := framework.TestContext(t, 2*time.Minute)
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("nfs-provisioner exited: %v", p.waitErr)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.healthz, nil)
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
		b, _ := os.ReadFile(p.log)
		t.Fatalf("nfs-provisioner did not become ready: %v\n%s", err, tail(string(b), 60))
	}
}

// stop sends SIGTERM and waits for the process (SIGKILL after stopTimeout).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		t.Errorf("nfs-provisioner did not stop within %s after SIGTERM; killing it", stopTimeout)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// restart stops the process and starts it again with the same arguments.
func (p *proc) restart(t *testing.T) {
	t.Helper()
	p.stop(t)
	p.start(t)
}

// server is a server-mode nfs-provisioner with its own Ganesha.
type server struct {
	*proc
	name       string
	exportRoot string
	config     string
}

// startServer runs nfs-provisioner in server mode with --run-server on
// loopback, with a fresh export root, grace period 0, and extra args (which
// override the defaults) and environment.
func startServer(t *testing.T, env []string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{
		name:       "kubeprov.io/nfs-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		exportRoot: filepath.Join(dir, "export"),
		config:     filepath.Join(dir, "ganesha", "ganesha.conf"),
	}
	args := append([]string{
		"--mode=server",
		"--provisioner=" + s.name,
		"--run-server",
		"--export-root=" + s.exportRoot,
		"--ganesha-config=" + s.config,
		"--bind-address=" + loopback,
		"--grace-period=0",
		"--server-hostname=" + loopback,
	}, extra...)
	// Ganesha logs to the default /dev/stderr: into the provisioner's log.
	s.proc = startProc(t, args, env)
	return s
}

// ganeshaPid returns the pid of the running ganesha.nfsd from its pid file.
func (s *server) ganeshaPid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(s.config), "ganesha.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// createClass creates a StorageClass for provisioner and deletes it after the test.
func createClass(t *testing.T, name, provisioner string, params map[string]string) *storagev1.StorageClass {
	t.Helper()
	class := framework.NewStorageClass(name, provisioner, params)
	class, err := cp.Client.StorageV1().StorageClasses().Create(t.Context(), class, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return class
}

// createPVC creates a claim; mutate, if set, changes it first.
func createPVC(t *testing.T, ns, name, class, size string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := framework.NewPVC(ns, name, class, size)
	if mutate != nil {
		mutate(pvc)
	}
	pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

// bound creates a claim and waits until it is Bound; it returns the PV.
func bound(t *testing.T, ctx context.Context, ns, name, class string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolume {
	t.Helper()
	createPVC(t, ns, name, class, "1Mi", mutate)
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// deleteClaim deletes a claim and waits until its PV is gone (reclaim
// policy Delete: the provisioner deleted the asset).
func deleteClaim(t *testing.T, ctx context.Context, ns, name, pvName string) {
	t.Helper()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pvName); err != nil {
		t.Fatal(err)
	}
}

// failsWith waits for a ProvisioningFailed event on the claim whose message
// contains every one of want (an earlier one may say something else: the
// provisioner's informer may not have the brand-new class yet), checks it is
// a Warning, and deletes the claim: failing claims retried every few seconds
// would otherwise use up the event budget and delay later tests' events.
func failsWith(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim, want ...string) {
	t.Helper()
	var seen []string
	matches := func(msg string) bool {
		for _, w := range want {
			if !strings.Contains(msg, w) {
				return false
			}
		}
		return true
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, cp.Client, pvc)
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range events {
			if ev.Reason != "ProvisioningFailed" {
				continue
			}
			seen = append(seen, ev.Message)
			if matches(ev.Message) {
				if ev.Type != corev1.EventTypeWarning {
					return false, fmt.Errorf("event %q has type %s, want Warning", ev.Message, ev.Type)
				}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ProvisioningFailed event of %s mentioning %q: %v; events: %q", pvc.Name, want, err, seen)
	}
	if err := cp.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nfsURL is the libnfs URL of path on the loopback server; version "4"
// walks Ganesha's NFSv4 pseudo file system instead of the MOUNT protocol.
func nfsURL(path, version string) string {
	u := "nfs://" + loopback + path
	if version != "" {
		u += "?version=" + version
	}
	return u
}

// runTool runs an NFS client tool and returns its combined output.
func runTool(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), err
}

// nfsWrite writes content to file in directory dir of the NFS server, with
// the userspace client.
func nfsWrite(t *testing.T, ctx context.Context, dir, file, content, version string) {
	t.Helper()
	local := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(local, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runTool(ctx, "nfs-cp", local, nfsURL(dir+"/"+file, version)); err != nil {
		t.Fatal(err)
	}
}

// nfsRead reads file in dir through NFS.
func nfsRead(ctx context.Context, dir, file, version string) (string, error) {
	return runTool(ctx, "nfs-cat", nfsURL(dir+"/"+file, version))
}

// mustRead reads through NFS and checks the content.
func mustRead(t *testing.T, ctx context.Context, dir, file, want, version string) {
	t.Helper()
	got, err := nfsRead(ctx, dir, file, version)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("read %q from nfs://%s%s/%s, want %q", got, loopback, dir, file, want)
	}
}

// showExports returns Ganesha's export list as dbus-send prints it.
func showExports(t *testing.T, ctx context.Context) string {
	t.Helper()
	out, err := runTool(ctx, "dbus-send", "--system", "--print-reply", "--dest=org.ganesha.nfsd",
		"/org/ganesha/nfsd/ExportMgr", "org.ganesha.nfsd.exportmgr.ShowExports")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exported reports whether Ganesha's export list has path.
func exported(t *testing.T, ctx context.Context, path string) bool {
	t.Helper()
	return strings.Contains(showExports(t, ctx), fmt.Sprintf("string %q", path))
}

// exportBlocks counts the EXPORT blocks of a Ganesha configuration file.
func exportBlocks(t *testing.T, config string) int {
	t.Helper()
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "EXPORT {") {
			n++
		}
	}
	return n
}

// volumeDirs lists the volume directories of an export root (hidden
// entries and the identity file are not volumes).
func volumeDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// exists reports whether path exists locally (without following a symlink).
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Sockets of the system daemons (fixed by their Debian packages).
const (
	rpcbindSocket   = "/run/rpcbind.sock"
	systemBusSocket = "/run/dbus/system_bus_socket"
)

// listening reports whether something accepts connections on a unix socket.
func listening(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// startDaemon runs a system daemon for the test unless one already listens
// on socket, waits until it listens, and stops exactly that process when the
// test ends. It returns the pid, 0 when it reused a running daemon.
func startDaemon(t *testing.T, socket string, name string, args ...string) int {
	t.Helper()
	if listening(socket) {
		return 0
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		t.Fatal(err)
	}
	// A socket file left by a dead daemon makes the new one fail.
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ctx := framework.TestContext(t, 30*time.Second)
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return listening(socket), nil
	}); err != nil {
		t.Fatalf("%s does not listen on %s: %v", name, socket, err)
	}
	return cmd.Process.Pid
}
