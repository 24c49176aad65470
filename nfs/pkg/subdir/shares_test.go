// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
)

func TestNewRejectsBadShares(t *testing.T) {
	ok := Share{Name: "fast", Root: "/mnt/fast", Server: "nfs1", Path: "/fast"}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"nothing":        {Config{}, "default NFS share: NFS server is empty"},
		"bad name":       {Config{Shares: []Share{{Name: "Fast_1", Root: "/mnt/f", Server: "s", Path: "/p"}}}, `NFS share name "Fast_1" must be a DNS label`},
		"empty name":     {Config{Shares: []Share{{Root: "/mnt/f", Server: "s", Path: "/p"}}}, `NFS share name "" must be a DNS label`},
		"twice":          {Config{Shares: []Share{ok, {Name: "fast", Root: "/mnt/other", Server: "nfs2", Path: "/x"}}}, `NFS share "fast" is configured twice`},
		"same export":    {Config{Root: "/mnt/d", Server: "nfs1", Path: "/fast/", Shares: []Share{ok}}, "are the same export"},
		"nested mounts":  {Config{Root: "/persistentvolumes", Server: "nfs1", Path: "/d", Shares: []Share{{Name: "fast", Root: "/persistentvolumes/fast", Server: "nfs2", Path: "/f"}}}, "mounted one inside the other"},
		"relative root":  {Config{Shares: []Share{{Name: "a", Root: "mnt", Server: "s", Path: "/p"}}}, `NFS share "a": root "mnt" must be an absolute path`},
		"relative path":  {Config{Shares: []Share{{Name: "a", Root: "/mnt", Server: "s", Path: "p"}}}, `NFS share "a": NFS path "p" must be an absolute path`},
		"missing server": {Config{Shares: []Share{{Name: "a", Root: "/mnt", Path: "/p"}}}, `NFS share "a": NFS server is empty`},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v; want an error containing %q", name, err, c.want)
		}
	}
	if _, err := New(Config{Shares: []Share{ok, {Name: "slow", Root: "/mnt/slow", Server: "nfs1", Path: "/slow"}}}); err != nil {
		t.Errorf("named shares only: %v", err)
	}
}

// twoShares is a provisioner with a default share and the named share
// "fast" on the same server, each in a directory of its own.
func twoShares(t *testing.T, strict bool) (p *Provisioner, def, fast string, volumes cache.Indexer) {
	t.Helper()
	def, fast = t.TempDir(), t.TempDir()
	volumes = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, err := New(Config{Root: def, Server: "nfs.example", Path: "/share", Strict: strict,
		Shares:  []Share{{Name: "fast", Root: fast, Server: "nfs.example", Path: "/share/fast"}},
		Volumes: corelisters.NewPersistentVolumeLister(volumes)})
	if err != nil {
		t.Fatal(err)
	}
	return p, def, fast, volumes
}

// provisioner provisions claim ns/name of a class with params, as PV
// pvc-name.
func provisioner(ctx context.Context, p *Provisioner) func(params map[string]string, name string) (*corev1.PersistentVolume, error) {
	return func(params map[string]string, name string) (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(ctx, controller.ProvisionOptions{StorageClass: class(params), PVName: "pvc-" + name, PVC: claim("ns", name)})
		return pv, err
	}
}

func TestShareParameterSelectsTheShare(t *testing.T) {
	p, def, fast, volumes := twoShares(t, false)
	_, ctx := ktesting.NewTestContext(t)
	provision := provisioner(ctx, p)
	onFast, err := provision(map[string]string{"share": "fast", "pathPattern": "${.PVC.name}", "onDelete": "delete"}, "a")
	if err != nil {
		t.Fatal(err)
	}
	if onFast.Spec.NFS.Server != "nfs.example" || onFast.Spec.NFS.Path != "/share/fast/a" || onFast.Annotations[AnnShare] != "fast" {
		t.Errorf("PV on share fast: %+v, annotations %v", onFast.Spec.NFS, onFast.Annotations)
	}
	if _, err := os.Stat(filepath.Join(fast, "a")); err != nil {
		t.Errorf("directory not on share fast: %v", err)
	}
	onDefault, err := provision(map[string]string{"pathPattern": "${.PVC.name}", "onDelete": "delete"}, "b")
	if err != nil {
		t.Fatal(err)
	}
	if onDefault.Spec.NFS.Path != "/share/b" || onDefault.Annotations[AnnShare] != "" {
		t.Errorf("PV on the default share: %+v, annotations %v", onDefault.Spec.NFS, onDefault.Annotations)
	}
	if _, err := os.Stat(filepath.Join(def, "b")); err != nil {
		t.Errorf("directory not on the default share: %v", err)
	}
	// The same relative directory on two shares is two directories.
	if _, err := provision(map[string]string{"share": "fast", "pathPattern": "b", "onDelete": "delete"}, "c"); err != nil {
		t.Errorf("directory b on share fast while b is used on the default share: %v", err)
	}
	// A share this provisioner does not have: never a server of the class's choosing.
	_, err = provision(map[string]string{"share": "other"}, "d")
	if err == nil || !strings.Contains(err.Error(), `parameter share "other" names no NFS share of this provisioner; it has: fast`) {
		t.Errorf("unknown share: %v", err)
	}
	for _, bad := range []string{"server", "path"} {
		if _, err := provision(map[string]string{bad: "evil.example"}, "e"); err == nil || !strings.Contains(err.Error(), "unknown parameter(s) "+bad) {
			t.Errorf("parameter %s: %v; want it rejected as unknown", bad, err)
		}
	}
	// Deletion goes to the share the PV is on, the nested share's path
	// winning over the default share's.
	if err := volumes.Add(onDefault); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, onFast); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fast, "a")); !os.IsNotExist(err) {
		t.Errorf("directory a on share fast after Delete: %v", err)
	}
	if err := p.Delete(ctx, onDefault); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(def, "b")); !os.IsNotExist(err) {
		t.Errorf("directory b on the default share after Delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fast, "b")); err != nil {
		t.Errorf("directory b of share fast went with the default share's b: %v", err)
	}
}

func TestNamedSharesOnlyNeedTheShareParameter(t *testing.T) {
	p, err := New(Config{Shares: []Share{{Name: "fast", Root: t.TempDir(), Server: "s", Path: "/f"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	_, _, err = p.Provision(ctx, controller.ProvisionOptions{StorageClass: class(nil), PVName: "pvc-1", PVC: claim("ns", "x")})
	if err == nil || !strings.Contains(err.Error(), "must set parameter share to one of the NFS shares this provisioner has: fast") {
		t.Errorf("class without share and no default share: %v", err)
	}
}

func TestCheckSharesNamesTheShare(t *testing.T) {
	p, _, fast, _ := twoShares(t, false)
	if err := p.CheckShares(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(fast); err != nil {
		t.Fatal(err)
	}
	err := p.CheckShares(context.Background())
	if err == nil || !strings.Contains(err.Error(), `NFS share "fast" nfs.example:/share/fast (mounted at `+fast+`)`) {
		t.Errorf("CheckShares with share fast missing: %v", err)
	}
	if err := os.WriteFile(fast, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckShares(context.Background()); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("CheckShares with a file as mount point: %v", err)
	}
}

// TestStrictMode: what strict mode refuses that the default accepts.
func TestStrictMode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, c := range []struct {
		params map[string]string
		want   string // the strict error
	}{
		{map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.annotations.nfs.io/storage-path}"}, `the claim has no annotation "nfs.io/storage-path"`},
		{map[string]string{"onDelete": "delete", "archiveOnDelete": "true"}, "contradict each other"},
	} {
		lenient, _, _, _ := twoShares(t, false)
		if _, _, err := lenient.Provision(ctx, controller.ProvisionOptions{StorageClass: class(c.params), PVName: "pvc-1", PVC: claim("ns", "x")}); err != nil {
			t.Errorf("%v without strict mode: %v", c.params, err)
		}
		strict, def, _, _ := twoShares(t, true)
		_, _, err := strict.Provision(ctx, controller.ProvisionOptions{StorageClass: class(c.params), PVName: "pvc-1", PVC: claim("ns", "x")})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v in strict mode: %v; want an error containing %q", c.params, err, c.want)
		}
		if entries, _ := os.ReadDir(def); len(entries) != 0 {
			t.Errorf("strict mode refused %v but left %v", c.params, entries)
		}
	}
}

// TestNestedExportsStayApart: the default share is /share and the share
// fast its subdirectory /share/fast on the same server (issue 25, case 3).
// A default-share claim must not get the nested share's export, or a
// directory inside it; and deleting such a volume must not remove that
// share's volumes.
func TestNestedExportsStayApart(t *testing.T) {
	p, def, fast, volumes := twoShares(t, false)
	_, ctx := ktesting.NewTestContext(t)
	provision := provisioner(ctx, p)
	onFast, err := provision(map[string]string{"share": "fast", "pathPattern": "${.PVC.name}"}, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := volumes.Add(onFast); err != nil {
		t.Fatal(err)
	}
	for i, pattern := range []string{"fast", "fast/a", "fast/b/c"} {
		pv, err := provision(map[string]string{"pathPattern": pattern}, "d"+strconv.Itoa(i))
		if err == nil || !strings.Contains(err.Error(), `reaches into the export of NFS share "fast" nfs.example:/share/fast`) {
			t.Errorf("default-share pathPattern %q: PV %v, error %v; want it refused", pattern, pv, err)
		}
	}
	if entries, _ := os.ReadDir(def); len(entries) != 0 {
		t.Errorf("refused claims left %v on the default share", entries)
	}
	// Next to the nested export, not in it: fine.
	if _, err := provision(map[string]string{"pathPattern": "fastx"}, "e"); err != nil {
		t.Errorf("directory fastx beside the nested export: %v", err)
	}
	// A PV an earlier version made on the default share with the nested
	// share's whole path: on the server, its directory is share fast.
	// Simulate that by the default share's mount holding fast's volume.
	if err := os.MkdirAll(filepath.Join(def, "fast", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(def, "fast", "a", "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	whole := &corev1.PersistentVolume{}
	whole.Name = "pvc-old"
	whole.Annotations = map[string]string{AnnOnDelete: OnDeleteDelete}
	whole.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/share/fast"}
	err = p.Delete(ctx, whole)
	if err == nil || !strings.Contains(err.Error(), "reaches into the export") {
		t.Errorf("Delete of a default-share PV at the nested export: %v; want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(def, "fast", "a", "data")); err != nil {
		t.Errorf("share fast's volume was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fast, "a")); err != nil {
		t.Errorf("share fast's volume directory: %v", err)
	}
}
