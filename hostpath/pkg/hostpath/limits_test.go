// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/cache"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubeprov/external-storage/hostpath/pkg/quota"
	"github.com/kubeprov/external-storage/hostpath/pkg/quota/quotatest"
)

const mib = 1 << 20

// writeBytes writes n bytes into a new file and syncs it, returning the
// first error, as a pod's write would see it.
func writeBytes(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, n))
	serr := f.Sync()
	cerr := f.Close()
	return errors.Join(werr, serr, cerr)
}

// enforcedProvisioner is a provisioner whose --pv-dir is a btrfs
// filesystem of its own, with quotas as given.
func enforcedProvisioner(t *testing.T, quotas bool, pvs cache.Indexer) (*Provisioner, string) {
	dir := quotatest.MountBtrfs(t, quotas)
	p, err := New(Config{Dir: dir, Node: node, DirMode: DefaultDirMode, Volumes: corelisters.NewPersistentVolumeLister(pvs)})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// TestSizeEnforcedOnBtrfs: on btrfs with quotas a volume is a subvolume
// limited to its request: a write past it fails with "disk quota
// exceeded"; an expansion raises the limit; deleting it removes the
// subvolume.
func TestSizeEnforcedOnBtrfs(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, dir := enforcedProvisioner(t, true, pvs)
	pv := provision(t, p, sized("small", "16Mi"))
	if err := pvs.Add(pv); err != nil {
		t.Fatal(err)
	}
	path := pv.Spec.HostPath.Path
	if sub, err := quota.IsSubvolume(dir, filepath.Base(path)); err != nil || !sub {
		t.Fatalf("%s: subvolume %v (%v), want a btrfs subvolume", path, sub, err)
	}
	if err := writeBytes(filepath.Join(path, "a"), 12*mib); err != nil {
		t.Fatalf("writing 12Mi into a 16Mi volume: %v", err)
	}
	if err := writeBytes(filepath.Join(path, "b"), 8*mib); !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("writing 20Mi into a 16Mi volume: %v, want EDQUOT (disk quota exceeded)", err)
	}
	quotatest.Run(t, "btrfs", "filesystem", "sync", dir)
	if used := usedGauge(t, p, dir); used < 12*mib || used > 16*mib {
		t.Errorf("hostpath_path_used_bytes of %s = %v, want the 12Mi written (at most the 16Mi limit)", dir, used)
	}
	if err := p.ExpandVolume(t.Context(), pv, 48*mib); err != nil {
		t.Fatalf("ExpandVolume to 48Mi: %v", err)
	}
	if err := writeBytes(filepath.Join(path, "b"), 8*mib); err != nil {
		t.Fatalf("writing 20Mi into the volume grown to 48Mi: %v", err)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("%s holds %v after Delete", dir, got)
	}
}

// TestEnforceCapacitySettings: enforceCapacity "always" refuses a path
// that cannot limit, saying why; "auto" makes a plain directory there;
// "never" makes plain directories even on btrfs with quotas; a value that
// is none of them is refused with the configuration.
func TestEnforceCapacitySettings(t *testing.T) {
	config := func(dir, enforce string) string {
		return `{"nodePathMap":[{"node":"` + node + `","paths":["` + dir + `"]}],"enforceCapacity":"` + enforce + `"}`
	}
	plain := t.TempDir() // not btrfs
	off := quotatest.MountBtrfs(t, false)
	on := quotatest.MountBtrfs(t, true)
	free := map[string]uint64{plain: 1 << 40, off: 1 << 40, on: 1 << 40}
	for _, tc := range []struct {
		dir, enforce string
		subvolume    bool
		refused      string
	}{
		{dir: plain, enforce: EnforceAlways, refused: "which has no per-directory limits this provisioner can set"},
		{dir: off, enforce: EnforceAlways, refused: "btrfs quotas are off on " + off + ": run `btrfs quota enable " + off + "`"},
		{dir: plain, enforce: EnforceAuto},
		{dir: off, enforce: EnforceAuto},
		{dir: on, enforce: EnforceAuto, subvolume: true},
		{dir: on, enforce: EnforceNever},
	} {
		p := configProvisioner(t, config(tc.dir, tc.enforce), free)
		o := sized("v-"+tc.enforce, "16Mi")
		pv, _, err := p.Provision(t.Context(), o)
		if tc.refused != "" {
			if !errors.Is(err, ErrCannotEnforce) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s, %s: %v, want ErrCannotEnforce saying %q", tc.dir, tc.enforce, err, tc.refused)
			}
			if got := entries(t, tc.dir); len(got) != 0 {
				t.Errorf("%s, %s: refused, yet %v made", tc.dir, tc.enforce, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s, %s: %v", tc.dir, tc.enforce, err)
			continue
		}
		sub, err := quota.IsSubvolume(tc.dir, filepath.Base(pv.Spec.HostPath.Path))
		if err != nil || sub != tc.subvolume {
			t.Errorf("%s, %s: subvolume %v (%v), want %v", tc.dir, tc.enforce, sub, err, tc.subvolume)
		}
		if err := p.Delete(t.Context(), pv); err != nil {
			t.Errorf("%s, %s: Delete: %v", tc.dir, tc.enforce, err)
		}
	}
	if _, err := ParseConfig([]byte(config("/a", "alway"))); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `enforceCapacity "alway" must be auto, always or never`) {
		t.Errorf("a misspelled enforceCapacity: %v", err)
	}
}

// usedGauge is what hostpath_path_used_bytes says of path.
func usedGauge(t *testing.T, p *Provisioner, path string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "hostpath_path_used_bytes" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "path" && l.GetValue() == path {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no hostpath_path_used_bytes for %s", path)
	return 0
}
