// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/pathpattern"
	"github.com/kubeprov/external-storage/lib/podrun/podruntest"
)

// The attack of issue 25 case 1, in both ways directories are made: by the
// provisioner itself, and by helper pods on the volume's node.
type mode struct {
	name string
	// new returns a provisioner, its root, and the node claims are for.
	new func(t *testing.T) (*Provisioner, string, string)
}

var modes = []mode{
	{"direct", func(t *testing.T) (*Provisioner, string, string) {
		p, dir := newProvisioner(t)
		return p, dir, node
	}},
	{"helper pods", func(t *testing.T) (*Provisioner, string, string) {
		ctx := t.Context()
		c := newHelperClient()
		go func() {
			for range podruntest.Kubelet(ctx, t, c, helperNS, runsHelper(t)) {
			}
		}()
		p, dir := helperProvisioner(t, newHelperDirs(t, c, time.Minute))
		return p, dir, "worker-7"
	}},
}

// patterned is a claim whose directory is its annotation dir, as a class
// with pathPattern ${.PVC.annotations.dir} gives it.
func patterned(pvName, node, dir string) controller.ProvisionOptions {
	o := options(claim(corev1.ReadWriteOnce))
	o.PVName = pvName
	o.PVC.Name = pvName
	o.PVC.Annotations = map[string]string{"dir": dir}
	o.SelectedNodeName = node
	o.StorageClass.Parameters = map[string]string{KeyPathPattern: "${.PVC.annotations.dir}"}
	return o
}

// TestNestedPatternedVolumeRefused: claim 1 gets directory a, which its
// pods may write; claim 2 asks for a/x/data, inside it. Refused, and
// nothing is made inside claim 1's volume.
func TestNestedPatternedVolumeRefused(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			p, dir, node := m.new(t)
			provision(t, p, patterned("pvc-1", node, "a"))
			pv, err := provisionEnded(t, p, patterned("pvc-2", node, "a/x/data"))
			if err == nil {
				t.Fatalf("claim 2 got %s, inside claim 1's volume %s", pv.Spec.HostPath.Path, filepath.Join(dir, "a"))
			}
			if !strings.Contains(err.Error(), "a/x") && !strings.Contains(err.Error(), `"a"`) {
				t.Errorf("error %q does not name the directory", err)
			}
			if got := entries(t, filepath.Join(dir, "a")); len(got) != 0 {
				t.Errorf("made %v inside claim 1's volume", got)
			}
		})
	}
}

// TestSymlinkSwapNeverFollowed: claim 2's directory a/x/data is inside
// claim 1's volume a (made by an earlier version, which did not refuse
// it); a pod of claim 1 replaces x by a link to another tenant's directory
// or to a host directory. Deleting claim 2's volume removes nothing the
// link points at, and a claim whose directory goes through the link is
// refused instead of getting the link's target.
func TestSymlinkSwapNeverFollowed(t *testing.T) {
	for _, m := range modes {
		for _, target := range []string{"inside", "outside"} {
			t.Run(m.name+"/"+target, func(t *testing.T) {
				p, dir, node := m.new(t)
				host := t.TempDir()
				// Another tenant's volume, and a host directory.
				for _, d := range []string{filepath.Join(dir, "other-tenant", "data"), filepath.Join(host, "data")} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(d, "precious"), []byte("x"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				// Empty, so that a volume made through the link would
				// look like a fresh one.
				for _, d := range []string{filepath.Join(dir, "other-tenant", "fresh"), filepath.Join(host, "fresh")} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				pv := provision(t, p, patterned("pvc-2", node, "a/x/data"))
				// a is claim 1's volume, which its pods write.
				if err := os.Chmod(filepath.Join(dir, "a"), 0o777); err != nil {
					t.Fatal(err)
				}
				link := "../other-tenant"
				if target == "outside" {
					link = host
				}
				if err := os.RemoveAll(filepath.Join(dir, "a", "x")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(link, filepath.Join(dir, "a", "x")); err != nil {
					t.Fatal(err)
				}

				_, err := untilEnded(t.Context(), t, func() (any, error) { return nil, p.Delete(t.Context(), pv) })
				if err == nil || !strings.Contains(err.Error(), "symbolic link") {
					t.Errorf("Delete through the link: %v; want a refusal naming the symbolic link", err)
				}
				for _, f := range []string{filepath.Join(dir, "other-tenant", "data", "precious"), filepath.Join(host, "data", "precious")} {
					if _, err := os.Stat(f); err != nil {
						t.Errorf("Delete removed what the link points at: %v", err)
					}
				}
				// Were a not writable by pods (which alone refuses it),
				// the link is still not followed.
				if err := os.Chmod(filepath.Join(dir, "a"), 0o755); err != nil {
					t.Fatal(err)
				}
				got, err := provisionEnded(t, p, patterned("pvc-3", node, "a/x/fresh"))
				if err == nil {
					t.Errorf("a claim got %s, which the link resolves to %s", got.Spec.HostPath.Path, link)
				} else if !strings.Contains(err.Error(), "symbolic link") {
					t.Errorf("Provision through the link: %v; want a refusal naming the symbolic link", err)
				}
				if got := entries(t, filepath.Join(dir, "other-tenant", "fresh")); len(got) != 0 {
					t.Errorf("made %v in the other tenant's directory", got)
				}
			})
		}
	}
}

// TestNestedVolumesRefusedByTheirPVs: with a directory mode pods' users
// cannot write (--dir-mode 0700, root pods still can), the PVs alone tell
// that one volume would be inside or above another: refused whichever
// comes first, and a volume holding another's directory is not deleted.
func TestNestedVolumesRefusedByTheirPVs(t *testing.T) {
	volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, dir := newProvisioner(t, func(c *Config) {
		c.DirMode = 0o700
		c.Volumes = corelisters.NewPersistentVolumeLister(volumes)
	})
	outer := provision(t, p, patterned("pvc-1", node, "a"))
	if err := volumes.Add(outer); err != nil {
		t.Fatal(err)
	}
	for pv, rel := range map[string]string{"pvc-2": "a/x/data", "pvc-3": "a"} {
		_, _, err := p.Provision(t.Context(), patterned(pv, node, rel))
		if !errors.Is(err, pathpattern.ErrOverlap) || !strings.Contains(err.Error(), "PersistentVolume pvc-1") {
			t.Errorf("%s for %s: %v; want a refusal naming pvc-1", rel, pv, err)
		}
	}
	if got := entries(t, filepath.Join(dir, "a")); len(got) != 0 {
		t.Errorf("made %v inside pvc-1's volume", got)
	}
	// Above an existing volume: b/c first, then b.
	inner := provision(t, p, patterned("pvc-4", node, "b/c"))
	if _, _, err := p.Provision(t.Context(), patterned("pvc-5", node, "b")); !errors.Is(err, pathpattern.ErrOverlap) {
		t.Errorf("b above b/c: %v; want ErrOverlap", err)
	}
	// Not yet in the cache, the provisions under way count alike.
	if _, _, err := p.Provision(t.Context(), patterned("pvc-6", node, "b/c/d")); !errors.Is(err, pathpattern.ErrOverlap) {
		t.Errorf("b/c/d inside b/c before its PV is cached: %v; want ErrOverlap", err)
	}
	// A PV of an earlier version whose directory holds pvc-4's.
	legacy := inner.DeepCopy()
	legacy.Name, legacy.Annotations[AnnDir], legacy.Spec.HostPath.Path = "pvc-old", "b", filepath.Join(dir, "b")
	if err := volumes.Add(inner); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), legacy); !errors.Is(err, pathpattern.ErrOverlap) {
		t.Errorf("Delete of a directory holding another volume's: %v; want ErrOverlap", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "c")); err != nil {
		t.Errorf("pvc-4's directory: %v", err)
	}
	// Deleting the inner one first works, and then the outer one.
	if err := p.Delete(t.Context(), inner); err != nil {
		t.Fatal(err)
	}
	if err := volumes.Delete(inner); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), legacy); err != nil {
		t.Errorf("Delete of b once b/c is gone: %v", err)
	}
}

// TestKeepVolume: what the cache keeps of a bound PV is what the check
// reads, without touching a map other cached PVs share.
func TestKeepVolume(t *testing.T) {
	shared := map[string]string{controller.AnnProvisionedBy: "x"}
	full := &corev1.PersistentVolume{}
	full.Annotations = map[string]string{AnnNode: node, AnnDir: "a", "other": "y"}
	full.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/v/a"}
	cached := &corev1.PersistentVolume{}
	cached.Annotations = shared
	KeepVolume(full, cached)
	if cached.Annotations[AnnNode] != node || cached.Spec.HostPath.Path != "/v/a" || cached.Annotations["other"] != "" {
		t.Errorf("cached %v %v", cached.Annotations, cached.Spec.HostPath)
	}
	if len(shared) != 1 {
		t.Errorf("the shared map was changed: %v", shared)
	}
}
