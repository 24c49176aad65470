// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzProvision feeds a StorageClass parameter and mount option (both
// absent when empty) and a PV name to Provision and Delete on a real
// directory. A class with either is refused naming the class and what it
// sets; otherwise the volume is exactly <dir>/<pv name> or nothing at all,
// and nothing outside the directory is ever created or removed.
func FuzzProvision(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, value, mountOption, pvName string) {
		outer := t.TempDir()
		p, dir := newProvisioner(t, func(c *Config) { c.Dir = filepath.Join(outer, "volumes") })
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		o := options(claim(corev1.ReadWriteOnce))
		o.PVName = pvName
		if key != "" || value != "" {
			o.StorageClass.Parameters = map[string]string{key: value}
		}
		if mountOption != "" {
			o.StorageClass.MountOptions = []string{mountOption}
		}

		pv, _, err := p.Provision(t.Context(), o)
		switch {
		case o.StorageClass.Parameters != nil:
			if err == nil || !strings.Contains(err.Error(), "StorageClass hostpath: unknown parameter(s) "+key+":") {
				t.Fatalf("parameter %q: error %v", key, err)
			}
		case mountOption != "":
			if err == nil || !strings.Contains(err.Error(), "StorageClass hostpath: mountOptions") {
				t.Fatalf("mount option %q: error %v", mountOption, err)
			}
		case err == nil:
			if got, want := pv.Spec.HostPath.Path, filepath.Join(dir, pvName); got != want || filepath.Dir(got) != dir {
				t.Fatalf("PV name %q: volume at %q, want %q", pvName, got, want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != pvName || !entries[0].IsDir() {
				t.Fatalf("PV name %q: directory holds %v", pvName, entries)
			}
			if err := p.Delete(t.Context(), pv); err != nil {
				t.Fatalf("PV name %q: Delete: %v", pvName, err)
			}
		}
		assertEmpty(t, dir)
		if entries, _ := os.ReadDir(outer); len(entries) != 1 {
			t.Fatalf("PV name %q: %s holds %v besides the volume directory", pvName, outer, entries)
		}
	})
}

// FuzzDelete deletes a PV whose name, node annotation and hostPath are
// anything a creator or editor of PVs could write, on a node holding two
// volumes and files outside the volume directory: nothing but the PV's own
// directory (named after it, inside --pv-dir) is ever removed.
func FuzzDelete(f *testing.F) {
	f.Add("pvc-a", "", "")
	f.Add("pvc-x", "", "pvc-a")
	f.Add("pvc-x", "", "..")
	f.Add("..", "", "")
	f.Fuzz(func(t *testing.T, pvName, node, hostPath string) {
		outer := t.TempDir()
		p, dir := newProvisioner(t, func(c *Config) { c.Dir = filepath.Join(outer, "volumes") })
		for _, d := range []string{filepath.Join(dir, "pvc-a"), filepath.Join(dir, "pvc-b"), filepath.Join(outer, "precious")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if node == "" {
			node = p.cfg.Node
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{AnnNode: node}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(dir, hostPath)}}},
		}
		_ = p.Delete(t.Context(), pv)
		for _, d := range []string{filepath.Join(dir, "pvc-a"), filepath.Join(dir, "pvc-b"), filepath.Join(outer, "precious"), dir} {
			if d == filepath.Join(dir, pvName) && filepath.Join(dir, hostPath) == d {
				continue // the PV's own directory may go
			}
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("PV %q (hostPath %q) removed %s: %v", pvName, hostPath, d, err)
			}
		}
	})
}
