// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
)

// Subdir mode on a share served by a real Ganesha: the share is itself a
// server-mode volume, mounted (here: the same directory) into the subdir
// provisioner, which is configured through the former provisioner's
// environment variables. Volumes are written and read through the NFS
// client. The provisioner changes the share directly here (in a cluster it
// goes through its NFS mount, which this kernel cannot do), so Ganesha's
// cache may still answer for a removed directory: removals are checked on
// the server's file system.
func TestSubdir(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 6*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-subdir")
	cp.CreateTestStorageClass(t, framework.NewStorageClass("nfs-subdir-share", srv.name, nil))
	share := bound(t, ctx, ns, "share", "nfs-subdir-share", nil).Spec.NFS.Path

	name := "kubeprov.io/nfs-subdir-test"
	startProc(t, []string{"--mode=subdir", "--nfs-root=" + share},
		[]string{"NFS_SERVER=" + loopback, "NFS_PATH=" + share, "PROVISIONER_NAME=" + name})
	class := func(t *testing.T, suffix string, params map[string]string) string {
		n := "nfs-subdir-" + suffix
		cp.CreateTestStorageClass(t, framework.NewStorageClass(n, name, params))
		return n
	}

	t.Run("default_pattern_delete", func(t *testing.T) {
		pv := bound(t, ctx, ns, "plain", class(t, "plain", map[string]string{"onDelete": "delete"}), nil)
		rel := ns + "-plain-" + pv.Name
		if pv.Spec.NFS.Server != loopback || pv.Spec.NFS.Path != share+"/"+rel || pv.Annotations["nfs.kubeprov.io/subdir"] != rel {
			t.Fatalf("PV NFS source %+v, annotations %v; want %s:%s/%s", pv.Spec.NFS, pv.Annotations, loopback, share, rel)
		}
		dir := pv.Spec.NFS.Path
		nfsWrite(t, ctx, dir, "f.txt", "subdir data\n", "4")
		mustRead(t, ctx, dir, "f.txt", "subdir data\n", "4")
		mustRead(t, ctx, share+"/"+rel, "f.txt", "subdir data\n", "")
		deleteClaim(t, ctx, ns, "plain", pv.Name)
		if exists(t, filepath.Join(share, rel)) {
			t.Errorf("directory %s still exists after onDelete delete", rel)
		}
	})

	t.Run("nested_pattern_archive", func(t *testing.T) {
		params := map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.labels.team}/${.PVC.name}", "onDelete": "archive"}
		pv := bound(t, ctx, ns, "nested", class(t, "nested", params), func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Labels = map[string]string{"team": "blue"}
		})
		if want := share + "/" + ns + "/blue/nested"; pv.Spec.NFS.Path != want {
			t.Fatalf("PV path %s, want %s", pv.Spec.NFS.Path, want)
		}
		nfsWrite(t, ctx, pv.Spec.NFS.Path, "keep.txt", "archived data\n", "4")
		deleteClaim(t, ctx, ns, "nested", pv.Name)
		if exists(t, filepath.Join(share, ns, "blue", "nested")) {
			t.Errorf("nested directory still exists after archive")
		}
		mustRead(t, ctx, share+"/"+ns+"/blue/archived-nested", "keep.txt", "archived data\n", "4")
	})

	t.Run("archive_is_the_default_and_archiveOnDelete_false_deletes", func(t *testing.T) {
		def := bound(t, ctx, ns, "legacy-default", class(t, "legacy-default", map[string]string{"pathPattern": "legacy/${.PVC.name}"}), nil)
		if got := def.Annotations["nfs.kubeprov.io/on-delete"]; got != "archive" {
			t.Errorf("on-delete annotation %q, want archive", got)
		}
		nfsWrite(t, ctx, def.Spec.NFS.Path, "old.txt", "legacy\n", "4")
		deleteClaim(t, ctx, ns, "legacy-default", def.Name)
		if !exists(t, filepath.Join(share, "legacy", "archived-legacy-default")) {
			t.Errorf("no archived-legacy-default after deleting a claim of a class without onDelete")
		}
		del := bound(t, ctx, ns, "legacy-false", class(t, "legacy-false", map[string]string{"pathPattern": "legacy/${.PVC.name}", "archiveOnDelete": "false"}), nil)
		deleteClaim(t, ctx, ns, "legacy-false", del.Name)
		if exists(t, filepath.Join(share, "legacy", "legacy-false")) || exists(t, filepath.Join(share, "legacy", "archived-legacy-false")) {
			t.Errorf("archiveOnDelete false left the directory or an archive")
		}
	})

	t.Run("retain", func(t *testing.T) {
		pv := bound(t, ctx, ns, "kept", class(t, "retain", map[string]string{"pathPattern": "kept-${.PVC.name}", "onDelete": "retain"}), nil)
		nfsWrite(t, ctx, pv.Spec.NFS.Path, "k.txt", "retained\n", "4")
		deleteClaim(t, ctx, ns, "kept", pv.Name)
		mustRead(t, ctx, pv.Spec.NFS.Path, "k.txt", "retained\n", "4")
	})

	t.Run("traversal_rejected", func(t *testing.T) {
		outside := filepath.Dir(share)
		for claim, tc := range map[string]struct {
			pattern    string
			annotation string
		}{
			"dotdot":     {pattern: "../escape-${.PVC.name}"},
			"absolute":   {pattern: "/tmp/escape-${.PVC.name}"},
			"annotation": {pattern: "${.PVC.annotations.dir}", annotation: "../../escape-annotation"},
		} {
			n := class(t, "trav-"+claim, map[string]string{"pathPattern": tc.pattern})
			pvc := createPVC(t, ns, "trav-"+claim, n, "1Mi", func(pvc *corev1.PersistentVolumeClaim) {
				if tc.annotation != "" {
					pvc.Annotations = map[string]string{"dir": tc.annotation}
				}
			})
			failsWith(t, ctx, pvc, "pathPattern")
		}
		matches, _ := filepath.Glob(filepath.Join(outside, "escape-*"))
		matches2, _ := filepath.Glob(filepath.Join(filepath.Dir(outside), "escape-*"))
		if len(matches)+len(matches2) > 0 || exists(t, "/tmp/escape-trav-absolute") {
			t.Errorf("directories created outside the share: %v %v", matches, matches2)
		}
	})

	t.Run("symlink_rejected", func(t *testing.T) {
		target := t.TempDir()
		if err := os.Symlink(target, filepath.Join(share, "link")); err != nil {
			t.Fatal(err)
		}
		pvc := createPVC(t, ns, "via-link", class(t, "link", map[string]string{"pathPattern": "link/${.PVC.name}"}), "1Mi", nil)
		failsWith(t, ctx, pvc, "pathPattern", "symbolic link")
		if entries, _ := os.ReadDir(target); len(entries) != 0 {
			t.Errorf("provisioner wrote through the symlink: %v", entries)
		}
	})

	t.Run("existing_directory_needs_reuseExisting", func(t *testing.T) {
		if err := os.MkdirAll(filepath.Join(share, "taken"), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(share, "taken", "old.txt"), []byte("old data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		refused := createPVC(t, ns, "taken-no", class(t, "taken-no", map[string]string{"pathPattern": "taken"}), "1Mi", nil)
		failsWith(t, ctx, refused, "already exists", "reuseExisting")
		pv := bound(t, ctx, ns, "taken-yes", class(t, "taken-yes", map[string]string{"pathPattern": "taken", "reuseExisting": "true", "onDelete": "retain"}), nil)
		mustRead(t, ctx, pv.Spec.NFS.Path, "old.txt", "old data\n", "4")

		// Even with reuseExisting, a directory in use by a PV is not shared.
		again := createPVC(t, ns, "taken-again", class(t, "taken-again", map[string]string{"pathPattern": "taken/${.PVC.name}", "reuseExisting": "true"}), "1Mi", nil)
		failsWith(t, ctx, again, "overlaps", pv.Name)
	})

	t.Run("directory_of_a_bound_volume_not_shared", func(t *testing.T) {
		// A volume this process did not make: only the cache, where bound
		// volumes are kept small, knows its path.
		if err := os.MkdirAll(filepath.Join(share, "static"), 0o777); err != nil {
			t.Fatal(err)
		}
		pv := framework.NewPV("static-"+ns, "", "1Mi")
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: loopback, Path: share + "/static"}}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "static"}
		if _, err := cp.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cp.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		})
		createPVC(t, ns, "static", "", "1Mi", nil)
		if _, _, err := framework.WaitForPVCBound(ctx, cp.Client, ns, "static"); err != nil {
			t.Fatal(err)
		}
		inside := createPVC(t, ns, "inside-static", class(t, "inside-static", map[string]string{"pathPattern": "static/${.PVC.name}", "reuseExisting": "true"}), "1Mi", nil)
		failsWith(t, ctx, inside, "overlaps", pv.Name)
	})

	t.Run("gid", func(t *testing.T) {
		pv := bound(t, ctx, ns, "grouped", class(t, "gid", map[string]string{"gid": "2345", "onDelete": "delete"}), nil)
		if got := pv.Annotations["pv.beta.kubernetes.io/gid"]; got != "2345" {
			t.Errorf("gid annotation %q, want 2345", got)
		}
		st, err := os.Stat(filepath.Join(share, pv.Annotations["nfs.kubeprov.io/subdir"]))
		if err != nil {
			t.Fatal(err)
		}
		if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 2345 || st.Mode()&os.ModeSetgid == 0 || st.Mode().Perm() != 0o770 {
			t.Errorf("directory gid %d mode %s, want gid 2345, setgid, rwxrwx---", gid, st.Mode())
		}
	})

	t.Run("bad_parameters", func(t *testing.T) {
		for claim, tc := range map[string]struct {
			params map[string]string
			want   []string
		}{
			"rootsquash": {map[string]string{"rootSquash": "true"}, []string{"rootSquash", "server mode"}},
			"unknown":    {map[string]string{"pathpattern": "x"}, []string{"unknown parameter(s) pathpattern"}},
			"ondelete":   {map[string]string{"onDelete": "shred"}, []string{"onDelete", `"shred"`}},
		} {
			n := class(t, "bad-"+claim, tc.params)
			pvc := createPVC(t, ns, "bad-"+claim, n, "1Mi", nil)
			failsWith(t, ctx, pvc, tc.want...)
		}
	})
}
