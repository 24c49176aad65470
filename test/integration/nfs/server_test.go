// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	nfsbackend "github.com/kubeprov/external-storage/test/backend/nfs"
	"github.com/kubeprov/external-storage/test/framework"
)

// A claim becomes an export a real NFS client writes into and reads back;
// deleting it refuses clients and removes the directory.
func TestServerExportLifecycle(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 4*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-server")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-lifecycle", srv.name,
		map[string]string{"gid": "1234", "rootSquash": "false", "mountOptions": "vers=4.1,hard"}))

	pv := bound(t, ctx, ns, "data", "nfs-server-lifecycle", nil)
	dir := filepath.Join(srv.ExportRoot, pv.Name)
	if pv.Spec.NFS == nil || pv.Spec.NFS.Server != loopback || pv.Spec.NFS.Path != dir {
		t.Fatalf("PV source %+v, want NFS %s:%s", pv.Spec.PersistentVolumeSource, loopback, dir)
	}
	if got := pv.Annotations["pv.beta.kubernetes.io/gid"]; got != "1234" {
		t.Errorf("PV annotation pv.beta.kubernetes.io/gid = %q, want 1234", got)
	}
	// The classic provisioner's mountOptions parameter.
	if got := strings.Join(pv.Spec.MountOptions, ","); got != "vers=4.1,hard" {
		t.Errorf("PV mount options %q, want vers=4.1,hard from the class's mountOptions parameter", got)
	}
	config, err := os.ReadFile(srv.GaneshaConfig)
	if err != nil {
		t.Fatal(err)
	}
	if id := pv.Annotations["Export_Id"]; id == "" || !strings.Contains(string(config), "Export_Id = "+id+";\n\tPath = "+dir+";") {
		t.Errorf("PV annotation Export_Id = %q does not match the block of %s in the configuration:\n%s", id, dir, config)
	}
	identity, err := os.ReadFile(filepath.Join(srv.ExportRoot, "nfs-provisioner.identity"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pv.Annotations["Provisioner_Id"]; got != strings.TrimSpace(string(identity)) || got == "" {
		t.Errorf("PV annotation Provisioner_Id = %q, want the identity file's %q", got, identity)
	}
	if block := pv.Annotations["EXPORT_block"]; !strings.Contains(block, "Path = "+dir+";") || !strings.Contains(block, "Squash = no_root_squash;") {
		t.Errorf("PV annotation EXPORT_block = %q", block)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 1234 || st.Mode()&os.ModeSetgid == 0 {
		t.Errorf("volume directory has gid %d and mode %s, want gid 1234 with setgid", gid, st.Mode())
	}
	if !exported(t, ctx, dir) {
		t.Fatalf("Ganesha does not export %s:\n%s", dir, showExports(t, ctx))
	}
	// Ganesha logs into the container log (--ganesha-log=/dev/stderr).
	if !srv.HasLog("NFS SERVER INITIALIZED") {
		t.Errorf("Ganesha's start is not in nfs-provisioner's log %s", srv.LogPath)
	}

	// What a pod would do: write through NFSv3 and NFSv4, read back.
	nfsWrite(t, ctx, dir, "hello.txt", "hello over nfs\n", "")
	mustRead(t, ctx, dir, "hello.txt", "hello over nfs\n", "4")
	nfsWrite(t, ctx, dir, "v4.txt", "written with v4\n", "4")
	mustRead(t, ctx, dir, "v4.txt", "written with v4\n", "")
	if b, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(b) != "hello over nfs\n" {
		t.Fatalf("file written over NFS is %q on the server (%v)", b, err)
	}

	deleteClaim(t, ctx, ns, "data", pv.Name)
	if _, err := runTool(ctx, "nfs-ls", nfsURL(dir, "")); err == nil || !strings.Contains(err.Error(), "MNT3ERR_ACCES") {
		t.Errorf("nfs-ls of the deleted export: %v; want MNT3ERR_ACCES", err)
	}
	if exported(t, ctx, dir) {
		t.Errorf("Ganesha still exports %s", dir)
	}
	if exists(t, dir) {
		t.Errorf("volume directory %s still exists", dir)
	}
	if n := exportBlocks(t, srv.GaneshaConfig); n != 0 {
		t.Errorf("%d EXPORT blocks left in %s, want 0", n, srv.GaneshaConfig)
	}
}

// Exports and Export_Id allocation survive a restart of nfs-provisioner
// (and of the Ganesha it runs); a crashed Ganesha is restarted.
func TestServerRestart(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 5*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-restart")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-restart", srv.name, map[string]string{"rootSquash": "true"}))

	a := bound(t, ctx, ns, "a", "nfs-server-restart", nil)
	b := bound(t, ctx, ns, "b", "nfs-server-restart", nil)
	if !strings.Contains(a.Annotations["EXPORT_block"], "Squash = root_id_squash;") {
		t.Errorf("rootSquash true gave EXPORT_block %q", a.Annotations["EXPORT_block"])
	}
	dirA := a.Spec.NFS.Path
	idB, _ := strconv.Atoi(b.Annotations["Export_Id"])
	nfsWrite(t, ctx, dirA, "keep.txt", "survives restarts\n", "")

	oldGanesha := srv.ganeshaPid(t)
	srv.restart(t)
	if err := syscall.Kill(oldGanesha, 0); err == nil {
		t.Errorf("ganesha.nfsd %d still runs after nfs-provisioner stopped", oldGanesha)
	}
	mustRead(t, ctx, dirA, "keep.txt", "survives restarts\n", "")

	// An id is not reused even after its export is gone.
	deleteClaim(t, ctx, ns, "b", b.Name)
	c := bound(t, ctx, ns, "c", "nfs-server-restart", nil)
	if idC, _ := strconv.Atoi(c.Annotations["Export_Id"]); idC <= idB {
		t.Errorf("new export got Export_Id %d, want more than %d (the deleted export's)", idC, idB)
	}

	// The supervisor restarts a Ganesha that dies.
	pid := srv.ganeshaPid(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := nfsRead(ctx, dirA, "keep.txt", "")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("export not served again after ganesha.nfsd was killed: %v", err)
	}
	if newPid := srv.ganeshaPid(t); newPid == pid {
		t.Errorf("ganesha.nfsd pid file still says %d", pid)
	}
	if n, pvs := exportBlocks(t, srv.GaneshaConfig), 2; n != pvs {
		t.Errorf("%d EXPORT blocks, want %d (one per PV)", n, pvs)
	}
}

// Limits and parameters a user can get wrong end in Warning events naming
// the problem; --export-subnet keeps other clients out.
func TestServerRejects(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 4*time.Minute)
	// 192.0.2.0/24 is a documentation range: nothing here talks to it, and
	// 127.0.0.1 is not in it.
	srv := startServer(t, nil, "--max-exports=1", "--export-subnet=192.0.2.0/24")
	ns := cp.CreateTestNamespace(t, "nfs-rejects")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-rejects", srv.name, nil))
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-typo", srv.name, map[string]string{"rootSqash": "true"}))
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-badgid", srv.name, map[string]string{"gid": "wheel"}))

	typo := createPVC(t, ns, "typo", "nfs-server-typo", "1Mi", nil)
	failsWith(t, ctx, typo, "unknown parameter(s) rootSqash")
	badGID := createPVC(t, ns, "badgid", "nfs-server-badgid", "1Mi", nil)
	failsWith(t, ctx, badGID, "parameter gid", `"wheel"`)
	huge := createPVC(t, ns, "huge", "nfs-server-rejects", "1Pi", nil)
	failsWith(t, ctx, huge, "free", srv.ExportRoot)

	pv := bound(t, ctx, ns, "only", "nfs-server-rejects", nil)
	if !exported(t, ctx, pv.Spec.NFS.Path) {
		t.Fatalf("Ganesha does not export %s", pv.Spec.NFS.Path)
	}
	if _, err := runTool(ctx, "nfs-ls", nfsURL(pv.Spec.NFS.Path, "")); err == nil || !strings.Contains(err.Error(), "MNT3ERR_ACCES") {
		t.Errorf("nfs-ls from outside --export-subnet: %v; want MNT3ERR_ACCES", err)
	}
	second := createPVC(t, ns, "second", "nfs-server-rejects", "1Mi", nil)
	failsWith(t, ctx, second, "--max-exports")
	if dirs := srv.volumeDirs(t); len(dirs) != 1 {
		t.Errorf("volume directories %v, want only the bound claim's", dirs)
	}
}

// With --service-name, PVs name the Service's ClusterIP; a Service without
// the side protocols' ports is accepted with a warning (NFSv4 needs only 2049).
func TestServerServiceAddress(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := cp.CreateTestNamespace(t, "nfs-service")
	svc, err := cp.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nfs"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "nfs"},
			Ports:    []corev1.ServicePort{{Name: "nfs", Port: 2049}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, []string{"POD_NAMESPACE=" + ns}, "--server-hostname=", "--service-name=nfs")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-service", srv.name, nil))
	pv := bound(t, ctx, ns, "via-service", "nfs-server-service", nil)
	if pv.Spec.NFS.Server != svc.Spec.ClusterIP || svc.Spec.ClusterIP == "" {
		t.Errorf("PV server %q, want the Service's ClusterIP %q", pv.Spec.NFS.Server, svc.Spec.ClusterIP)
	}
	if !srv.HasLog("does not expose an NFS port", "port=20048") {
		t.Errorf("no warning about the Service's missing mountd port in the log")
	}
}

// rpcbind and the system D-Bus that already run (as on a host, or in
// another container of the pod) are reused, not duplicated, and left
// running when nfs-provisioner stops.
func TestServerReusesRunningDaemons(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 3*time.Minute)
	daemons, err := nfsbackend.StartSystemDaemons(ctx, t.TempDir())
	t.Cleanup(func() {
		for i := len(daemons) - 1; i >= 0; i-- {
			if err := daemons[i].Stop(); err != nil {
				t.Errorf("stopping %s: %v", daemons[i].Name, err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-reuse")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-reuse", srv.name, nil))
	pv := bound(t, ctx, ns, "data", "nfs-server-reuse", nil)
	nfsWrite(t, ctx, pv.Spec.NFS.Path, "f.txt", "reused daemons\n", "")
	mustRead(t, ctx, pv.Spec.NFS.Path, "f.txt", "reused daemons\n", "4")

	srv.stop(t)
	for _, d := range []string{"rpcbind", "dbus-daemon"} {
		if !srv.HasLog(`"Reusing a running daemon" logger="nfs-provisioner.supervisor" daemon="` + d + `"`) {
			t.Errorf("nfs-provisioner did not reuse the running %s", d)
		}
	}
	for _, d := range daemons {
		select {
		case <-d.Exited():
			t.Errorf("%s (%d), started by the test, was stopped by nfs-provisioner", d.Name, d.Pid())
		default:
		}
	}
	if !nfsbackend.SystemDaemonsRunning(ctx) {
		t.Errorf("rpcbind or D-Bus no longer listens after nfs-provisioner stopped")
	}
}

// gidAllocate gives each claim a group of its own from gidMin-gidMax: the
// PV records it and the exported directory belongs to it; a restarted
// provisioner does not hand out a group a volume's directory holds, even
// when its PV's annotation was edited to another, a deleted claim's group
// is handed out again, and bad ranges end in a Warning naming the key.
func TestServerGIDAllocate(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 5*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-gidalloc")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-gidalloc", srv.name,
		map[string]string{"gidAllocate": "true", "gidMin": "6000", "gidMax": "6002"}))
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-gidbad", srv.name,
		map[string]string{"gidAllocate": "true", "gidMin": "6k"}))
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-server-gidswap", srv.name,
		map[string]string{"gidAllocate": "true", "gidMin": "7000", "gidMax": "6000"}))

	failsWith(t, ctx, createPVC(t, ns, "bad", "nfs-server-gidbad", "1Mi", nil), "parameter gidMin", `"6k"`)
	failsWith(t, ctx, createPVC(t, ns, "swap", "nfs-server-gidswap", "1Mi", nil), "gidMin (7000) is greater than gidMax (6000)")

	// gid returns the PV's recorded group after checking that the exported
	// directory belongs to it, with setgid so that new files do too.
	gid := func(pv *corev1.PersistentVolume) int {
		t.Helper()
		n, err := strconv.Atoi(pv.Annotations["pv.beta.kubernetes.io/gid"])
		if err != nil || n < 6000 || n > 6002 {
			t.Fatalf("PV %s has gid annotation %q, want a group in 6000-6002", pv.Name, pv.Annotations["pv.beta.kubernetes.io/gid"])
		}
		st, err := os.Stat(pv.Spec.NFS.Path)
		if err != nil {
			t.Fatal(err)
		}
		if g := int(st.Sys().(*syscall.Stat_t).Gid); g != n || st.Mode()&os.ModeSetgid == 0 {
			t.Errorf("directory %s has group %d and mode %s, want group %d with setgid", pv.Spec.NFS.Path, g, st.Mode(), n)
		}
		if !exported(t, ctx, pv.Spec.NFS.Path) {
			t.Errorf("Ganesha does not export %s", pv.Spec.NFS.Path)
		}
		return n
	}
	a := bound(t, ctx, ns, "a", "nfs-server-gidalloc", nil)
	b := bound(t, ctx, ns, "b", "nfs-server-gidalloc", nil)
	gidA, gidB := gid(a), gid(b)
	if gidA == gidB {
		t.Fatalf("claims a and b share group %d", gidA)
	}

	// A PV's annotation is only a claim: someone edits b's to a's group.
	// The new process must take the groups from the export directories,
	// whose group only the provisioner sets, or it would hand b's group out
	// again.
	if _, err := cp.Client.CoreV1().PersistentVolumes().Patch(ctx, b.Name, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{"pv.beta.kubernetes.io/gid":"%d"}}}`, gidA), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.restart(t)
	c := bound(t, ctx, ns, "c", "nfs-server-gidalloc", nil)
	if gidC := gid(c); gidC == gidA || gidC == gidB {
		t.Fatalf("after a restart claim c got group %d, which a (%d) or b (%d) holds", gidC, gidA, gidB)
	}
	failsWith(t, ctx, createPVC(t, ns, "full", "nfs-server-gidalloc", "1Mi", nil), "no free GID in range 6000-6002")

	deleteClaim(t, ctx, ns, "a", a.Name)
	if d := bound(t, ctx, ns, "d", "nfs-server-gidalloc", nil); gid(d) != gidA {
		t.Errorf("claim d got group %s, want %d, freed by deleting a", d.Annotations["pv.beta.kubernetes.io/gid"], gidA)
	}
}
