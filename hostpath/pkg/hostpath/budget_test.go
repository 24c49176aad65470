// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprov/external-storage/lib/controller"
)

func TestParseConfigCapacity(t *testing.T) {
	m, err := ParseConfig([]byte(`{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/a","/b"],"pathCapacity":{"/a/":"10Gi"}},{"node":"n1","paths":["/c"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		node, path string
		want       int64
		ok         bool
	}{
		{"n2", "/a", 10 << 30, true}, // an unlisted node takes the default entry's
		{"n2", "/b", 0, false},
		{"n1", "/c", 0, false},
		{"n1", "/a", 0, false}, // n1 has its own entry
	} {
		if got, ok := m.CapacityOf(tc.node, tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("CapacityOf(%s, %s) = %d, %v; want %d, %v", tc.node, tc.path, got, ok, tc.want, tc.ok)
		}
	}
	shared, err := ParseConfig([]byte(`{"nodePathMap":[],"sharedFileSystemPath":"/s","sharedFileSystemCapacity":"1Ti"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := shared.CapacityOf("any", "/s"); got != 1<<40 || !ok {
		t.Errorf("shared capacity %d %v, want 1Ti", got, ok)
	}
	for in, want := range map[string]string{
		`{"nodePathMap":[{"node":"n1","paths":["/a"],"pathCapacity":{"/b":"1Gi"}}]}`:      `node n1: pathCapacity names "/b", which is not one of its paths [/a]`,
		`{"nodePathMap":[{"node":"n1","paths":["/a"],"pathCapacity":{"/a":"ten gigs"}}]}`: `node n1: pathCapacity of /a "ten gigs" is not a quantity`,
		`{"nodePathMap":[{"node":"n1","paths":["/a"],"pathCapacity":{"/a":"0"}}]}`:        `pathCapacity of /a "0" must be more than zero`,
		`{"nodePathMap":[{"node":"n1","paths":["/a"],"pathCapacities":{"/a":"1Gi"}}]}`:    `unknown key "pathCapacities": hostpath-provisioner understands nodePathMap (node, paths, pathCapacity)`,
		`{"nodePathMap":[{"node":"n1","paths":["/a"]}],"sharedFileSystemCapacity":"1Gi"}`: "sharedFileSystemCapacity is set without a sharedFileSystemPath",
		`{"nodePathMap":[],"sharedFileSystemPath":"/s","sharedFileSystemCapacity":"-1"}`:  `sharedFileSystemCapacity "-1" must be more than zero`,
	} {
		if _, err := ParseConfig([]byte(in)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v, want an ErrConfig containing %q", in, err, want)
		}
	}
}

// budgetProvisioner is a provisioner whose node has the given paths, each
// with a capacity in GiB, plenty of free space, and PVs listed from pvs.
func budgetProvisioner(t *testing.T, pvs cache.Indexer, gib ...int) (*Provisioner, []string) {
	t.Helper()
	d := mkdirs(t, len(gib))
	caps := make([]string, len(d))
	free := map[string]uint64{}
	for i, dir := range d {
		caps[i] = fmt.Sprintf("%q:\"%dGi\"", dir, gib[i])
		free[dir] = 1 << 50
	}
	config := `{"nodePathMap":[{"node":"` + node + `","paths":["` + strings.Join(d, `","`) + `"],"pathCapacity":{` + strings.Join(caps, ",") + `}}]}`
	return configProvisioner(t, config, free, func(c *Config) { c.Volumes = corelisters.NewPersistentVolumeLister(pvs) }), d
}

// sized is a claim of the given request, with a PV name of its own.
func sized(name, request string) controller.ProvisionOptions {
	c := claim(corev1.ReadWriteOnce)
	c.Name, c.UID = name, types.UID("uid-"+name)
	c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(request)
	o := options(c)
	o.PVName = "pvc-" + name
	return o
}

// TestBudgetPlacement: a claim goes to the path with the most room left
// (capacity less what the PVs on it hold), not the one with the most
// free space; and a claim that fits nowhere is refused with each path's
// numbers, sent back to the scheduler when it selected the node.
func TestBudgetPlacement(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, d := budgetProvisioner(t, pvs, 10, 5)
	existing := provision(t, p, sized("old", "8Gi")) // the most room: d[0]
	if got := filepath.Dir(existing.Spec.HostPath.Path); got != d[0] {
		t.Fatalf("first volume under %s, want %s", got, d[0])
	}
	if err := pvs.Add(existing); err != nil {
		t.Fatal(err)
	}
	pv := provision(t, p, sized("new", "3Gi")) // d[0] has 2Gi left, d[1] 5Gi
	if got := filepath.Dir(pv.Spec.HostPath.Path); got != d[1] {
		t.Errorf("volume under %s, want %s (5Gi left, against 2Gi)", got, d[1])
	}

	o := sized("huge", "3Gi") // d[0] 2Gi left, d[1] 2Gi (the 3Gi volume is held, its PV not yet cached)
	o.SelectedNodeName = node
	_, state, err := p.Provision(t.Context(), o)
	want := fmt.Sprintf("no room on node %s for a request of 3Gi: %s has 2Gi left of 10Gi (its capacity in the configuration); %s has 2Gi left of 5Gi", node, d[0], d[1])
	if !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), want) || state != controller.ProvisioningReschedule {
		t.Errorf("got %v (state %s), want a Reschedule containing %q", err, state, want)
	}
	o.SelectedNodeName = "" // an Immediate class: nowhere else to go
	if _, state, err := p.Provision(t.Context(), o); !errors.Is(err, ErrNoRoom) || state != controller.ProvisioningFinished {
		t.Errorf("Immediate: got %v (state %s), want ErrNoRoom, Finished", err, state)
	}
	if got := entries(t, d[0]); len(got) != 1 {
		t.Errorf("%s holds %v, want only the first volume", d[0], got)
	}
}

// TestBudgetBurst: claims provisioned all at once never take more than
// the path holds between them, before any of their PVs is cached; a
// deleted volume's room is given back.
func TestBudgetBurst(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, d := budgetProvisioner(t, pvs, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []*corev1.PersistentVolume
	refused := 0
	for i := range 30 {
		wg.Go(func() {
			pv, _, err := p.Provision(t.Context(), sized(fmt.Sprintf("c%d", i), "1Gi"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made = append(made, pv)
			case errors.Is(err, ErrNoRoom):
				refused++
			default:
				t.Errorf("claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(made) != 10 || refused != 20 {
		t.Fatalf("%d volumes made, %d refused; want 10 of 1Gi in 10Gi, 20 refused", len(made), refused)
	}
	if got := entries(t, d[0]); len(got) != 10 {
		t.Errorf("%s holds %d directories, want 10", d[0], len(got))
	}
	// Their PVs are cached now: the holds end, and nothing counts twice.
	for _, pv := range made[1:] {
		if err := pvs.Add(pv); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := p.Provision(t.Context(), sized("late", "1Gi")); !errors.Is(err, ErrNoRoom) {
		t.Errorf("an 11th 1Gi volume in 10Gi: %v, want ErrNoRoom", err)
	}
	if err := p.Delete(t.Context(), made[0]); err != nil {
		t.Fatal(err)
	}
	provision(t, p, sized("late", "1Gi"))
}

// TestBudgetFromPVsAfterRestart: a new instance (a restart) counts the
// room from the PVs alone.
func TestBudgetFromPVsAfterRestart(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, _ := budgetProvisioner(t, pvs, 4)
	for _, name := range []string{"a", "b"} {
		if err := pvs.Add(provision(t, p, sized(name, "2Gi"))); err != nil {
			t.Fatal(err)
		}
	}
	restarted, err := New(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := restarted.Provision(t.Context(), sized("c", "1")); !errors.Is(err, ErrNoRoom) {
		t.Errorf("after a restart, a volume in a full path: %v, want ErrNoRoom", err)
	}
}

// TestBudgetFilesystemSize: without a configured capacity, a path's budget
// is its filesystem's size.
func TestBudgetFilesystemSize(t *testing.T) {
	p, dir := newProvisioner(t)
	size, err := LocalDirs{}.FilesystemSize(dir)
	if err != nil || size <= 0 {
		t.Fatalf("FilesystemSize(%s) = %d, %v", dir, size, err)
	}
	_, _, err = p.Provision(t.Context(), sized("big", resource.NewQuantity(size+1, resource.BinarySI).String()))
	want := fmt.Sprintf("%s has %s left of %s (the size of its filesystem)", dir, bytesString(size), bytesString(size))
	if !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want ErrNoRoom containing %q", err, want)
	}
}

// TestBudgetMetrics: the gauges show each path's budget and what its
// volumes, cached or held, take of it.
func TestBudgetMetrics(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, d := budgetProvisioner(t, pvs, 10, 5)
	if err := pvs.Add(provision(t, p, sized("a", "4Gi"))); err != nil {
		t.Fatal(err)
	}
	provision(t, p, sized("b", "3Gi")) // held, not cached: d[1] has 5Gi left against d[0]'s 6Gi
	provision(t, p, sized("c", "3Gi"))
	want := fmt.Sprintf(`
# HELP hostpath_path_allocated_bytes The capacity of the volumes on a node path, and of those being created or expanded there.
# TYPE hostpath_path_allocated_bytes gauge
hostpath_path_allocated_bytes{node=%[1]q,path=%[2]q} %[4]d
hostpath_path_allocated_bytes{node=%[1]q,path=%[3]q} %[5]d
# HELP hostpath_path_capacity_bytes The budget of a node path: its pathCapacity or sharedFileSystemCapacity, else its filesystem's size (absent when neither is known).
# TYPE hostpath_path_capacity_bytes gauge
hostpath_path_capacity_bytes{node=%[1]q,path=%[2]q} %[6]d
hostpath_path_capacity_bytes{node=%[1]q,path=%[3]q} %[7]d
`, node, d[0], d[1], int64(7<<30), int64(3<<30), int64(10<<30), int64(5<<30))
	if err := testutil.CollectAndCompare(p.Collector(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestNodeRoom: what a node offers a class is its paths' room: the largest
// and the sum.
func TestNodeRoom(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, _ := budgetProvisioner(t, pvs, 10, 5)
	provision(t, p, sized("a", "4Gi")) // on the 10Gi path: 6Gi and 5Gi left
	largest, total, known, err := p.NodeRoom("hostpath", node)
	if err != nil || !known || largest != 6<<30 || total != 11<<30 {
		t.Errorf("NodeRoom = %d, %d, %v, %v; want 6Gi, 11Gi, known", largest, total, known, err)
	}
	if nodes, err := p.ServedNodes("hostpath"); err != nil || len(nodes) != 1 || nodes[0] != node {
		t.Errorf("ServedNodes = %v, %v; want [%s]", nodes, err, node)
	}
}

// TestBudgetExpansion: a volume grows while its path has the room besides
// it; the increase is held until the PV shows it, so a new claim cannot
// take it meanwhile.
func TestBudgetExpansion(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, d := budgetProvisioner(t, pvs, 10)
	pv := provision(t, p, sized("a", "4Gi"))
	if err := pvs.Add(pv); err != nil {
		t.Fatal(err)
	}
	_, err := p.holdExpansion(pv, 11<<30)
	want := fmt.Sprintf("no room on node %s to grow %s to 11Gi: %s has 10Gi left of 10Gi (its capacity in the configuration), besides this volume", node, pv.Name, d[0])
	if !errors.Is(err, ErrNoRoom) || err.Error() != want {
		t.Errorf("growing 4Gi to 11Gi in 10Gi: %v, want %q", err, want)
	}
	if _, err := p.holdExpansion(pv, 9<<30); err != nil {
		t.Fatalf("growing 4Gi to 9Gi in 10Gi: %v", err)
	}
	if _, _, err := p.Provision(t.Context(), sized("b", "2Gi")); !errors.Is(err, ErrNoRoom) {
		t.Errorf("a 2Gi claim while 9Gi of 10Gi are promised: %v, want ErrNoRoom", err)
	}
	grown := pv.DeepCopy()
	grown.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("9Gi")
	if err := pvs.Update(grown); err != nil {
		t.Fatal(err)
	}
	provision(t, p, sized("c", "1Gi")) // 9Gi + 1Gi: the hold ended, nothing counts twice
}

// TestIsVolumeAndSharedClass: what the capacity publisher asks of a PV (is
// it ours, on which node) and of a class (on the shared path or not).
func TestIsVolumeAndSharedClass(t *testing.T) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, _ := budgetProvisioner(t, pvs, 10)
	pv := provision(t, p, sized("a", "1Gi"))
	if got, ok := p.IsVolume(pv); !ok || got != node {
		t.Errorf("IsVolume(our PV) = %q, %v; want %s, true", got, ok, node)
	}
	shared := pv.DeepCopy()
	shared.Annotations[AnnShared] = "true"
	if got, ok := p.IsVolume(shared); !ok || got != "" {
		t.Errorf("IsVolume(a shared PV) = %q, %v; want \"\", true (every node's room)", got, ok)
	}
	other := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/somewhere"}}}}
	if _, ok := p.IsVolume(other); ok {
		t.Error("IsVolume(a PV without our node annotation) = true")
	}
	if p.SharedClass("hostpath") {
		t.Error("SharedClass of a nodePathMap class = true")
	}
}
