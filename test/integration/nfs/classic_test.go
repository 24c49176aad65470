// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	nfsbackend "github.com/kubeprov/external-storage/test/backend/nfs"
	"github.com/kubeprov/external-storage/test/framework"
)

// TestClassicProvisionerManifest starts nfs-provisioner the way the classic
// nfs-provisioner's deploy/kubernetes manifests and flags do: single-dash
// flags, no -run-server (its default there, true: Ganesha is started),
// -leader-elect and -device-based-fsids; and a class written for it with
// keys in other cases (GID, RootSquash). The claim must be Bound, readable
// over NFS, exported as the class says, under a leader Lease.
func TestClassicProvisionerManifest(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := cp.CreateTestNamespace(t, "nfs-classic")
	layout := nfsbackend.NewLayout(t.TempDir())
	name := "example.com/nfs-classic"
	startProc(t, []string{
		"-provisioner=" + name,
		"-grace-period=0",
		"-leader-elect=true",
		"-leader-election-namespace=" + ns,
		"-device-based-fsids=true",
		"-export-root=" + layout.ExportRoot,
		"-ganesha-config=" + layout.GaneshaConfig,
		"-bind-address=" + loopback,
		"-server-hostname=" + loopback,
	}, nil)

	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, controller.LeaseName(name), metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Errorf("-leader-elect=true: no held leader Lease %s in %s: %v", controller.LeaseName(name), ns, err)
	}
	conf, err := os.ReadFile(layout.GaneshaConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "fsid_device = true;") {
		t.Errorf("-device-based-fsids=true: the new Ganesha configuration lacks fsid_device = true:\n%s", conf)
	}

	class := "classic-" + ns
	cp.CreateTestStorageClass(t, framework.NewStorageClass(class, name, map[string]string{"GID": "4242", "RootSquash": "true"}))
	pv := bound(t, ctx, ns, "classic", class, nil)
	if !strings.Contains(pv.Annotations["EXPORT_block"], "root_id_squash") || pv.Annotations["pv.beta.kubernetes.io/gid"] != "4242" {
		t.Errorf("RootSquash/GID not applied: annotations %v", pv.Annotations)
	}
	if !exported(t, ctx, pv.Spec.NFS.Path) {
		t.Errorf("%s is not in Ganesha's exports: Ganesha was not started without -run-server", pv.Spec.NFS.Path)
	}
	deleteClaim(t, ctx, ns, "classic", pv.Name)
}

// TestSubdirDirectoryOwnership: nfs-subdir-external-provisioner's
// NFS_DEFAULT_MODE, NFS_DEFAULT_UID, NFS_DEFAULT_GID and the claim
// annotations k8s-sigs.io/nfs-directory-mode, -uid, -gid (which win), on
// the directories on the share; a bad annotation is a Warning event naming
// it and its value, and no directory.
func TestSubdirDirectoryOwnership(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 4*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-owner")
	share := shareVolume(t, ctx, srv, ns, "share")
	startProc(t, []string{"--mode=subdir", "--nfs-root=" + share},
		[]string{"NFS_SERVER=" + loopback, "NFS_PATH=" + share, "PROVISIONER_NAME=" + upstreamName + "-owner",
			"NFS_DEFAULT_MODE=0750", "NFS_DEFAULT_UID=1000", "NFS_DEFAULT_GID=2000"})
	class := "owner-" + ns
	cp.CreateTestStorageClass(t, framework.NewStorageClass(class, upstreamName+"-owner",
		map[string]string{"pathPattern": "${.PVC.name}", "onDelete": "delete"}))

	check := func(t *testing.T, dir string, mode os.FileMode, uid, gid uint32) {
		t.Helper()
		st, err := os.Stat(filepath.Join(share, dir))
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode().Perm() != mode || sys.Uid != uid || sys.Gid != gid {
			t.Errorf("directory %s: %s %d:%d, want %s %d:%d", dir, st.Mode().Perm(), sys.Uid, sys.Gid, mode, uid, gid)
		}
	}
	pv := bound(t, ctx, ns, "defaults", class, nil)
	check(t, "defaults", 0o750, 1000, 2000)
	annotated := bound(t, ctx, ns, "annotated", class, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Annotations = map[string]string{
			"k8s-sigs.io/nfs-directory-mode": "0700", "k8s-sigs.io/nfs-directory-uid": "1001", "k8s-sigs.io/nfs-directory-gid": "2001"}
	})
	check(t, "annotated", 0o700, 1001, 2001)

	bad := createPVC(t, ns, "bad-mode", class, "1Mi", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Annotations = map[string]string{"k8s-sigs.io/nfs-directory-uid": "alice"}
	})
	failsWith(t, ctx, bad, "k8s-sigs.io/nfs-directory-uid", `"alice"`)
	if exists(t, filepath.Join(share, "bad-mode")) {
		t.Error("a refused claim left its directory")
	}
	deleteClaim(t, ctx, ns, "defaults", pv.Name)
	deleteClaim(t, ctx, ns, "annotated", annotated.Name)
}

// TestServerRunsStatd: with --run-server, rpc.statd runs as in the classic
// nfs-provisioner (port 662, registered with rpcbind as NSM, program
// 100024) and records a client as Ganesha's NFSv3 lock manager asks it to
// (SM_MON); after a restart sm-notify sends that client its reboot
// notification, which makes it reclaim its locks: the NSM state number moves
// on (sm-notify changes it only when it has clients to notify). Whether the
// SM_NOTIFY arrives is not asserted: the client here is this machine, whose
// rpc.statd is the one restarting, so delivery waits on sm-notify's retries.
func TestServerRunsStatd(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 3*time.Minute)
	srv := startServer(t, nil)
	out, err := runTool(ctx, "rpcinfo", "-T", "tcp", loopback, "100024", "1")
	if err != nil || !strings.Contains(out, "ready and waiting") {
		t.Fatalf("rpc.statd (NSM, program 100024) does not answer through rpcbind: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ganesha.StatdStateDir, "sm")); err != nil {
		t.Errorf("rpc.statd's monitor list: %v", err)
	}
	t.Cleanup(func() {
		// What SM_MON recorded, unless the notification removed it already.
		for _, d := range []string{"sm", "sm.bak"} {
			_ = os.Remove(filepath.Join(ganesha.StatdStateDir, d, "localhost"))
		}
	})
	if res, err := smMon(fmt.Sprintf("127.0.0.1:%d", ganesha.StatdPort), "127.0.0.1"); err != nil || res != 0 {
		t.Fatalf("SM_MON of a client: result %d, %v", res, err)
	}
	before := nsmState(t)
	srv.restart(t)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return nsmState(t) != before, nil
	})
	if err != nil {
		t.Errorf("NSM state number still %d after a restart: no reboot notification was sent", before)
	}
}

// nsmState is the NSM state number in rpc.statd's state file, 0 when it is
// missing or empty.
func nsmState(t *testing.T) uint32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ganesha.StatdStateDir, "state"))
	if errors.Is(err, os.ErrNotExist) || len(b) < 4 {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return binary.NativeEndian.Uint32(b)
}
