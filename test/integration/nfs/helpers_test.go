// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	nfsbackend "github.com/kubeprov/external-storage/test/backend/nfs"
	"github.com/kubeprov/external-storage/test/framework"
)

// loopback is where Ganesha listens and what PVs name as server.
const loopback = nfsbackend.Loopback

// proc is a running nfs-provisioner that a test can restart.
type proc struct {
	*framework.Process
	opts   framework.ProcessOptions
	dir    string
	starts int
}

// startProc runs nfs-provisioner with args (plus the kubeconfig and fast
// retries) and env, waits until /readyz answers 200, and stops it when the
// test ends, printing its log if the test failed.
func startProc(t *testing.T, args, env []string) *proc {
	t.Helper()
	p := &proc{
		opts: framework.ProcessOptions{
			Binary: framework.BuildTestBinary(t, "nfs", "nfs-provisioner"),
			Args: append([]string{
				"--kubeconfig=" + cp.KubeconfigPath,
				"--retry-interval-start=200ms",
				"--retry-interval-max=2s",
				"-v=4",
			}, args...),
			Env: env,
		},
		dir: t.TempDir(),
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() && p.Process != nil {
			t.Logf("nfs-provisioner log (%s):\n%s", p.LogPath, p.LogTail(80))
		}
	})
	p.start(t)
	return p
}

// start runs the process, each start with a log of its own.
func (p *proc) start(t *testing.T) {
	t.Helper()
	p.starts++
	p.opts.LogPath = filepath.Join(p.dir, fmt.Sprintf("nfs-provisioner-%d.log", p.starts))
	var err error
	if p.Process, err = framework.StartProcess(framework.TestContext(t, 2*time.Minute), p.opts); err != nil {
		t.Fatal(err)
	}
}

// stop stops the process (SIGTERM, then SIGKILL); it must exit cleanly.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if p.Process == nil { // it did not start
		return
	}
	if err := p.Stop(); err != nil {
		t.Error(err)
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
	nfsbackend.Layout
	name string
}

// startServer runs nfs-provisioner in server mode with --run-server on
// loopback, with a fresh export root, grace period 0, and extra args (which
// override the defaults) and environment.
func startServer(t *testing.T, env []string, extra ...string) *server {
	t.Helper()
	s := &server{
		Layout: nfsbackend.NewLayout(t.TempDir()),
		name:   "kubeprov.io/nfs-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
	}
	// Ganesha logs to the default /dev/stderr: into the provisioner's log.
	args := append(append(s.Args(s.name), "--run-server"), extra...)
	s.proc = startProc(t, args, env)
	return s
}

// ganeshaPid returns the pid of the running ganesha.nfsd from its pid file.
func (s *server) ganeshaPid(t *testing.T) int {
	t.Helper()
	pid, err := s.GaneshaPid()
	if err != nil {
		t.Fatal(err)
	}
	return pid
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
	waitEvent(t, ctx, pvc, want...)
	if err := cp.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitEvent waits for a Warning ProvisioningFailed event on the claim whose
// message contains every one of want, and leaves the claim alone.
func waitEvent(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim, want ...string) {
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

// volumeDirs lists the volume directories of the server's export root.
func (s *server) volumeDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := s.VolumeDirs()
	if err != nil {
		t.Fatal(err)
	}
	return dirs
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
