// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

// FuzzDelete deletes a PV whose name, NFS path and annotations are anything
// a creator or editor of PVs could write, on a share holding two volumes of
// the provisioner and a file of someone else: neither volume's directory, nor
// the file, nor anything outside the share is ever removed or archived,
// unless the PV is that volume's own.
func FuzzDelete(f *testing.F) {
	f.Add("pvc-x", "/share/ns1/a", "ns1/a", OnDeleteDelete)
	f.Add("pvc-x", "/share/ns1", "ns1", OnDeleteDelete)
	f.Add("pvc-x", "/share/ns1/b/..", "", OnDeleteArchive)
	f.Add("pvc-x", "/share/../etc", "", OnDeleteDelete)
	f.Add("pvc-a", "/share/ns1/a", "ns1/a", OnDeleteDelete)
	f.Fuzz(func(t *testing.T, pvName, nfsPath, annPath, onDelete string) {
		fx := newFixture(t)
		_, ctx := ktesting.NewTestContext(t)
		params := map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}", "onDelete": OnDeleteDelete}
		for _, n := range []string{"a", "b"} {
			pv, err := fx.provision(t, params, claim("ns1", n), "pvc-"+n)
			if err != nil {
				t.Fatal(err)
			}
			_ = fx.volumes.Add(pv)
		}
		others := filepath.Join(fx.dir, "someone-else")
		if err := os.WriteFile(others, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{AnnPath: annPath, AnnOnDelete: onDelete}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: nfsPath}}},
		}
		_ = fx.p.Delete(ctx, pv)
		for _, n := range []string{"a", "b"} {
			if pvName == "pvc-"+n {
				continue // its own volume may go
			}
			if _, err := os.Stat(filepath.Join(fx.dir, "ns1", n)); err != nil {
				t.Fatalf("PV %q (path %q) removed volume pvc-%s: %v", pvName, nfsPath, n, err)
			}
		}
		if _, err := os.Stat(others); err != nil {
			t.Fatalf("PV %q (path %q) removed a file that is no volume: %v", pvName, nfsPath, err)
		}
	})
}
