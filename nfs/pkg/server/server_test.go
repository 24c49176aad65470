// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/gidallocator"
	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	"github.com/kubeprov/external-storage/nfs/pkg/params"
)

// fakeGanesha loads exports from the configuration file as Ganesha does.
type fakeGanesha struct {
	mu      sync.Mutex
	loaded  map[uint16]string
	adds    int
	failAdd error
}

func (g *fakeGanesha) AddExport(_ context.Context, configPath, path string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failAdd != nil {
		return g.failAdd
	}
	f, err := ganesha.ParseFile(configPath)
	if err != nil {
		return err
	}
	b, ok := f.ByPath(path)
	if !ok {
		return errors.New("no such export in the file")
	}
	if _, ok := g.loaded[b.ID]; ok {
		return errors.New("export id already in use")
	}
	g.loaded[b.ID] = b.Path
	g.adds++
	return nil
}

func (g *fakeGanesha) RemoveExport(_ context.Context, id uint16) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.loaded, id)
	return nil
}

func (g *fakeGanesha) Exports(context.Context) (map[uint16]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[uint16]string{}
	for k, v := range g.loaded {
		out[k] = v
	}
	return out, nil
}

// fakeQuota records limits.
type fakeQuota struct{ limits map[string]int64 }

func (q *fakeQuota) Set(_ context.Context, dir string, _ uint32, bytes int64) error {
	q.limits[dir] = bytes
	return nil
}

func (q *fakeQuota) Clear(_ context.Context, dir string, _ uint32) error {
	delete(q.limits, dir)
	return nil
}

type fixture struct {
	root, config string
	g            *fakeGanesha
	q            *fakeQuota
	p            *Provisioner
}

func newFixture(t *testing.T, maxExports int) *fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir(), maxExports)
}

// newFixtureIn keeps its files in dir, whose path must not hold a "#": the
// Ganesha configuration would read the rest of the line as a comment.
func newFixtureIn(t *testing.T, dir string, maxExports int) *fixture {
	t.Helper()
	f := &fixture{root: filepath.Join(dir, "export"), config: filepath.Join(dir, "ganesha.conf"),
		g: &fakeGanesha{loaded: map[uint16]string{}}, q: &fakeQuota{limits: map[string]int64{}}}
	if err := os.Mkdir(f.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ganesha.EnsureConfig(f.config, ganesha.BaseOptions{RecoveryRoot: filepath.Join(dir, "rec")}); err != nil {
		t.Fatal(err)
	}
	f.p = f.restart(t, maxExports)
	return f
}

// restart returns a new provisioner on the same files, as after a restart.
func (f *fixture) restart(t *testing.T, maxExports int) *Provisioner {
	t.Helper()
	id, err := LoadIdentity(f.root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{ExportRoot: f.root, GaneshaConfig: f.config, MaxExports: maxExports, Server: "10.0.0.1",
		Identity: id, Exports: f.g, Quota: f.q, GIDs: gidallocator.New(fake.NewClientset())})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func options(pvName, size string, params map[string]string) controller.ProvisionOptions {
	return controller.ProvisionOptions{
		StorageClass: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Parameters: params},
		PVName:       pvName,
		PVC: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pvName},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
		},
	}
}

func TestProvisionIsIdempotentAndPersistent(t *testing.T) {
	f := newFixture(t, DefaultMaxExports)
	_, ctx := ktesting.NewTestContext(t)
	pv, _, err := f.p.Provision(ctx, options("pvc-a", "1Mi", map[string]string{"gid": "99", "rootSquash": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.root, "pvc-a")
	if pv.Spec.NFS.Server != "10.0.0.1" || pv.Spec.NFS.Path != dir {
		t.Errorf("NFS source %+v", pv.Spec.NFS)
	}
	if pv.Annotations[AnnExportID] != "1" || pv.Annotations["pv.beta.kubernetes.io/gid"] != "99" ||
		!strings.Contains(pv.Annotations[AnnExportBlock], "root_id_squash") || pv.Annotations[AnnProvisionerID] == "" {
		t.Errorf("annotations %v", pv.Annotations)
	}
	if f.q.limits[dir] != 1<<20 {
		t.Errorf("quota %v, want 1Mi on %s", f.q.limits, dir)
	}

	// A second call (lost answer) finds the same export; so does a new process.
	p2 := f.restart(t, DefaultMaxExports)
	again, _, err := p2.Provision(ctx, options("pvc-a", "1Mi", map[string]string{"gid": "99", "rootSquash": "true"}))
	if err != nil || again.Annotations[AnnExportID] != "1" || again.Annotations[AnnProvisionerID] != pv.Annotations[AnnProvisionerID] {
		t.Fatalf("second Provision: %v, annotations %v", err, again.Annotations)
	}
	if f.g.adds != 1 {
		t.Errorf("AddExport called %d times, want 1", f.g.adds)
	}
	// Ganesha restarted without the export loaded: Provision loads it again.
	f.g.loaded = map[uint16]string{}
	if _, _, err := p2.Provision(ctx, options("pvc-a", "1Mi", nil)); err != nil || f.g.adds != 2 {
		t.Errorf("Provision after Ganesha lost the export: %v, adds %d", err, f.g.adds)
	}

	b, _, err := p2.Provision(ctx, options("pvc-b", "1Mi", nil))
	if err != nil || b.Annotations[AnnExportID] != "2" {
		t.Fatalf("pvc-b: %v %v", err, b)
	}
	if err := p2.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	c, _, err := f.restart(t, DefaultMaxExports).Provision(ctx, options("pvc-c", "1Mi", nil))
	if err != nil || c.Annotations[AnnExportID] != "3" {
		t.Errorf("pvc-c after deleting export 2: %v, Export_Id %q; want 3", err, c.Annotations[AnnExportID])
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t, DefaultMaxExports)
	_, ctx := ktesting.NewTestContext(t)
	pv, _, err := f.p.Provision(ctx, options("pvc-a", "1Mi", nil))
	if err != nil {
		t.Fatal(err)
	}
	dir := pv.Spec.NFS.Path
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := pv.DeepCopy()
	foreign.Annotations[AnnProvisionerID] = "another-server"
	if err := f.p.Delete(ctx, foreign); !controller.IsIgnored(err) {
		t.Fatalf("Delete of another server's PV = %v, want ignored", err)
	}
	if err := f.p.Delete(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
	if len(f.g.loaded) != 0 || len(f.q.limits) != 0 {
		t.Errorf("left loaded exports %v, quotas %v", f.g.loaded, f.q.limits)
	}
	cfg, err := ganesha.ParseFile(f.config)
	if err != nil || len(cfg.Blocks) != 0 {
		t.Errorf("configuration still has blocks: %v %+v", err, cfg)
	}
	if err := f.p.Delete(ctx, pv); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	outside := pv.DeepCopy()
	outside.Spec.NFS.Path = "/etc"
	if err := f.p.Delete(ctx, outside); err == nil {
		t.Error("Delete of a path outside the export root succeeded")
	}
}

func TestProvisionRefusals(t *testing.T) {
	f := newFixture(t, 1)
	_, ctx := ktesting.NewTestContext(t)
	for name, c := range map[string]struct {
		size   string
		params map[string]string
		want   string
	}{
		"unknown key":       {"1Mi", map[string]string{"pathPattern": "x"}, "unknown parameter(s) pathPattern"},
		"bad gid":           {"1Mi", map[string]string{"gid": "users"}, "parameter gid"},
		"bad squash":        {"1Mi", map[string]string{"rootSquash": "sometimes"}, "rootSquash"},
		"bad mount options": {"1Mi", map[string]string{"mountOptions": "vers=4.1,hard soft"}, `parameter mountOptions: option "hard soft" contains a space`},
		"no free room":      {"1Ei", nil, "free"},
	} {
		_, state, err := f.p.Provision(ctx, options("pvc-"+strings.ReplaceAll(name, " ", "-"), c.size, c.params))
		if err == nil || !strings.Contains(err.Error(), c.want) || state != controller.ProvisioningFinished {
			t.Errorf("%s: %v (state %s); want a Finished error mentioning %q", name, err, state, c.want)
		}
	}
	if _, _, err := f.p.Provision(ctx, options("pvc-1", "1Mi", nil)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.p.Provision(ctx, options("pvc-2", "1Mi", nil)); err == nil || !strings.Contains(err.Error(), "--max-exports") {
		t.Errorf("second export with --max-exports=1: %v", err)
	}
	var names []string
	entries, _ := os.ReadDir(f.root)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "nfs-provisioner.identity,pvc-1" {
		t.Errorf("export root holds %v; refused claims must leave nothing", names)
	}
}

// TestMountOptionsParameter: the classic provisioner's mountOptions class
// parameter, comma-separated, reaches the PV besides the class's own field.
func TestMountOptionsParameter(t *testing.T) {
	f := newFixture(t, -1)
	_, ctx := ktesting.NewTestContext(t)
	o := options("pvc-opts", "1Mi", map[string]string{"mountOptions": " vers=4.1, hard,,nconnect=4 ,vers=4.1"})
	o.StorageClass.MountOptions = []string{"noatime", "hard"}
	pv, _, err := f.p.Provision(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pv.Spec.MountOptions, ","); got != "noatime,hard,vers=4.1,nconnect=4" {
		t.Errorf("PV mount options %q, want the class's field then the parameter's new ones: noatime,hard,vers=4.1,nconnect=4", got)
	}
}

func TestAddExportFailureIsInBackground(t *testing.T) {
	f := newFixture(t, DefaultMaxExports)
	_, ctx := ktesting.NewTestContext(t)
	f.g.failAdd = errors.New("ganesha is down")
	if _, state, err := f.p.Provision(ctx, options("pvc-a", "1Mi", nil)); err == nil || state != controller.ProvisioningInBackground {
		t.Fatalf("Provision with Ganesha down: %v, %s; want an InBackground error", err, state)
	}
	f.g.failAdd = nil
	pv, _, err := f.p.Provision(ctx, options("pvc-a", "1Mi", nil))
	if err != nil || pv.Annotations[AnnExportID] != "1" {
		t.Fatalf("retry: %v", err)
	}
}

func TestLoadIdentity(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadIdentity(dir)
	if err != nil || len(a) != 32 {
		t.Fatalf("LoadIdentity = %q, %v", a, err)
	}
	if b, err := LoadIdentity(dir); err != nil || b != a {
		t.Errorf("second LoadIdentity = %q, %v; want %q", b, err, a)
	}
	if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIdentity(dir); err == nil {
		t.Error("empty identity file accepted")
	}
}

// TestClassParametersIgnoreCase: the classic nfs-provisioner compared its
// class keys without regard to case, so classes written for it with GID,
// RootSquash or mountoptions mean what they meant there; two spellings of
// one key are refused, naming both.
func TestClassParametersIgnoreCase(t *testing.T) {
	f := newFixture(t, DefaultMaxExports)
	_, ctx := ktesting.NewTestContext(t)
	pv, _, err := f.p.Provision(ctx, options("pvc-case", "1Mi", map[string]string{"GID": "99", "RootSquash": "true", "MOUNTOPTIONS": "vers=4.1"}))
	if err != nil {
		t.Fatal(err)
	}
	if pv.Annotations["pv.beta.kubernetes.io/gid"] != "99" || !strings.Contains(pv.Annotations[AnnExportBlock], "root_id_squash") ||
		!slices.Contains(pv.Spec.MountOptions, "vers=4.1") {
		t.Errorf("GID/RootSquash/MOUNTOPTIONS not applied: annotations %v, mount options %v", pv.Annotations, pv.Spec.MountOptions)
	}
	_, _, err = f.p.Provision(ctx, options("pvc-twice", "1Mi", map[string]string{"gid": "99", "GID": "100"}))
	if err == nil || !strings.Contains(err.Error(), "GID and gid") {
		t.Errorf("gid and GID: %v; want an error naming both", err)
	}
}

// TestGIDAllocate: gidAllocate gives each volume a group of its own from
// gidMin-gidMax, recorded in the PV and owning the directory; a deleted
// volume's group is handed out again, and so is one whose Provision was
// refused after taking it. Bad ranges are refused naming the key.
func TestGIDAllocate(t *testing.T) {
	f := newFixture(t, DefaultMaxExports)
	_, ctx := ktesting.NewTestContext(t)
	alloc := map[string]string{"gidAllocate": "true", "GIDMin": "3000", "gidmax": "3001"}
	group := func(pv *corev1.PersistentVolume) string {
		t.Helper()
		st, err := os.Stat(pv.Spec.NFS.Path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&os.ModeSetgid == 0 || st.Mode().Perm() != 0o770 {
			t.Errorf("directory of %s has mode %s, want setgid 0770", pv.Name, st.Mode())
		}
		return strconv.Itoa(int(st.Sys().(*syscall.Stat_t).Gid))
	}
	a, _, err := f.p.Provision(ctx, options("pvc-a", "1Mi", alloc))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := f.p.Provision(ctx, options("pvc-b", "1Mi", alloc))
	if err != nil {
		t.Fatal(err)
	}
	gidA, gidB := a.Annotations[params.AnnGID], b.Annotations[params.AnnGID]
	if gidA != "3000" || gidB != "3001" || group(a) != gidA || group(b) != gidB {
		t.Fatalf("PV groups %q, %q and directory groups %s, %s; want 3000 and 3001 each", gidA, gidB, group(a), group(b))
	}
	if _, _, err := f.p.Provision(ctx, options("pvc-c", "1Mi", alloc)); err == nil || !strings.Contains(err.Error(), "no free GID in range 3000-3001") {
		t.Fatalf("third claim in a range of two: %v; want no free GID", err)
	}
	if err := f.p.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Refused after its group was taken: the group is free again.
	if _, _, err := f.p.Provision(ctx, options("pvc-huge", "1Pi", alloc)); err == nil || !strings.Contains(err.Error(), "free") {
		t.Fatalf("1Pi claim: %v; want refused for free space", err)
	}
	c, _, err := f.p.Provision(ctx, options("pvc-c", "1Mi", alloc))
	if err != nil || c.Annotations[params.AnnGID] != gidA || group(c) != gidA {
		t.Fatalf("after deleting %s: %v, gid %q; want its group %s", a.Name, err, c.Annotations[params.AnnGID], gidA)
	}

	for name, tc := range map[string]struct {
		params map[string]string
		want   string
	}{
		"bad gidMin":       {map[string]string{"gidAllocate": "true", "gidMin": "abc"}, "parameter gidMin"},
		"bad gidMax":       {map[string]string{"gidAllocate": "true", "gidMax": "0"}, "parameter gidMax"},
		"min above max":    {map[string]string{"gidAllocate": "true", "gidMin": "5", "gidMax": "4"}, "gidMin (5) is greater than gidMax (4)"},
		"range without it": {map[string]string{"gidMin": "3000"}, "gidMin has no effect without gidAllocate"},
		"and a fixed gid":  {map[string]string{"gidAllocate": "true", "gid": "5"}, "both gid and gidAllocate"},
		"not a boolean":    {map[string]string{"gidAllocate": "yes please"}, "gidAllocate must be"},
		"range used up":    {map[string]string{"gidAllocate": "true", "gidMin": "3000", "gidMax": "3000"}, "no free GID in range 3000-3000"},
	} {
		if _, _, err := f.p.Provision(ctx, options("pvc-bad", "1Mi", tc.params)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(f.root, "pvc-bad")); len(dirs) != 0 {
		t.Errorf("refused claims left %v", dirs)
	}
}
