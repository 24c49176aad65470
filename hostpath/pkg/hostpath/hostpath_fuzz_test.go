// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
			if err == nil || !strings.Contains(err.Error(), "StorageClass hostpath: parameters ["+strconv.Quote(key)+"]") {
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
