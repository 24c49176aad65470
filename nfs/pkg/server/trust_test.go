// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
)

// The export root also holds the provisioner's own files: no volume name,
// whoever chose it, makes one of them a volume to export or delete.
func TestOwnFilesAreNeverVolumes(t *testing.T) {
	f := newFixture(t, DefaultMaxExports)
	_, ctx := ktesting.NewTestContext(t)
	if err := os.Mkdir(filepath.Join(f.root, ".ganesha-recovery"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{IdentityFile, ".ganesha-recovery", ".hidden", "..", "a/b"} {
		if _, _, err := f.p.Provision(ctx, options(name, "1Mi", nil)); err == nil {
			t.Errorf("Provision(%q) succeeded", name)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnProvisionerID: f.p.cfg.Identity, AnnExportID: "1"}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				NFS: &corev1.NFSVolumeSource{Server: "10.0.0.1", Path: filepath.Join(f.root, name)}}},
		}
		if err := f.p.Delete(ctx, pv); err == nil {
			t.Errorf("Delete(%q) succeeded", name)
		}
	}
	if _, err := LoadIdentity(f.root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.root, ".ganesha-recovery")); err != nil {
		t.Errorf("recovery directory: %v", err)
	}
	if len(f.g.loaded) != 0 {
		t.Errorf("exported: %v", f.g.loaded)
	}
}

// FuzzDelete deletes PVs whose name, export path and Export_Id annotation are
// anything an editor of PVs could write, on a server holding two volumes:
// only a PV naming a volume's own directory and export removes anything, and
// then only that volume.
func FuzzDelete(f *testing.F) {
	f.Add("pvc-a", "pvc-a", "1")
	f.Add("pvc-a", "pvc-b", "2")
	f.Add("pvc-x", "pvc-a", "1")
	f.Add(IdentityFile, IdentityFile, "1")
	f.Add("pvc-a", "..", "65535")
	f.Fuzz(func(t *testing.T, pvName, dirName, exportID string) {
		dir, err := os.MkdirTemp("", "nfs-fuzz-delete")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		fx := newFixtureIn(t, dir, DefaultMaxExports) // fuzz test names hold a "#"
		_, ctx := ktesting.NewTestContext(t)
		for _, v := range []string{"pvc-a", "pvc-b"} {
			if _, _, err := fx.p.Provision(ctx, options(v, "1Mi", nil)); err != nil {
				t.Fatal(err)
			}
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{AnnProvisionerID: fx.p.cfg.Identity, AnnExportID: exportID}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				NFS: &corev1.NFSVolumeSource{Server: "10.0.0.1", Path: filepath.Join(fx.root, dirName)}}},
		}
		_ = fx.p.Delete(ctx, pv)
		for i, v := range []string{"pvc-a", "pvc-b"} {
			if v == pvName && v == filepath.Clean(dirName) {
				continue // the PV's own volume may go
			}
			if _, err := os.Stat(filepath.Join(fx.root, v)); err != nil {
				t.Fatalf("PV %q (dir %q, export %q) deleted volume %s: %v", pvName, dirName, exportID, v, err)
			}
			if fx.g.loaded[uint16(i+1)] == "" {
				t.Fatalf("PV %q (dir %q, export %q) unexported volume %s", pvName, dirName, exportID, v)
			}
			cfg, err := ganesha.ParseFile(fx.config)
			if err != nil || !slices.ContainsFunc(cfg.Blocks, func(b ganesha.Block) bool { return b.Path == filepath.Join(fx.root, v) }) {
				t.Fatalf("PV %q (dir %q, export %q) removed volume %s from the configuration", pvName, dirName, exportID, v)
			}
		}
		if _, err := LoadIdentity(fx.root); err != nil {
			t.Fatal(err)
		}
	})
}
