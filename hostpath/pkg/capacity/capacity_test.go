// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const (
	testProvisioner = "hostpath.example.com"
	testNamespace   = "kubeprov-hostpath"
	gi              = int64(1) << 30
)

// source is a Source whose answers the test sets.
type source struct {
	mu     sync.Mutex
	nodes  map[string][]string // by class
	rooms  map[item][3]int64   // largest, total, known (1)
	shared map[string]bool
}

func (s *source) NodeRoom(class, node string) (largest, total int64, known bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rooms[item{class, node}]
	if !ok {
		return 0, 0, false, errors.New("no such room")
	}
	return r[0], r[1], r[2] == 1, nil
}

func (s *source) ServedNodes(class string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes, ok := s.nodes[class]
	if !ok {
		return nil, errors.New("class not configured")
	}
	return nodes, nil
}

func (s *source) SharedClass(class string) bool { return s.shared[class] }

func (s *source) IsVolume(pv *corev1.PersistentVolume) (string, bool) {
	node, ok := pv.Annotations["node"]
	return node, ok
}

func (s *source) setRoom(class, node string, largest, total int64, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := int64(0)
	if known {
		k = 1
	}
	s.rooms[item{class, node}] = [3]int64{largest, total, k}
}

func wffcClass(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
}

// fixture is a Publisher with preloaded caches and a fake clientset.
type fixture struct {
	p      *Publisher
	client *fake.Clientset
	src    *source
}

// newFixture makes a Publisher over classes, the objects (in the API and
// its cache) and src; mutate may change its Config first.
func newFixture(t *testing.T, src *source, classes []*storagev1.StorageClass, objects []*storagev1.CSIStorageCapacity, mutate func(*Config)) *fixture {
	t.Helper()
	var objs []runtime.Object
	for _, o := range objects {
		objs = append(objs, o)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	cfg := Config{Provisioner: testProvisioner, Namespace: testNamespace, Client: client, Informers: factory, Source: src}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if err := factory.Storage().V1().StorageClasses().Informer().GetIndexer().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	p.objects = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objects {
		if err := p.objects.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	p.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[item]())
	t.Cleanup(p.queue.ShutDown)
	client.ClearActions()
	return &fixture{p: p, client: client, src: src}
}

// object is what the publisher writes for class on node.
func (f *fixture) object(class, node string, largest, total int64) *storagev1.CSIStorageCapacity {
	it := item{class, node}
	return &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{
			Name: f.p.Name(class, node), Namespace: testNamespace, UID: types.UID("uid-" + class + "-" + node),
			Labels: f.p.objectLabels(it), Annotations: map[string]string{AnnNode: node},
		},
		StorageClassName:  class,
		NodeTopology:      &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: node}},
		Capacity:          resource.NewQuantity(total, resource.BinarySI),
		MaximumVolumeSize: resource.NewQuantity(largest, resource.BinarySI),
	}
}

// syncAll syncs every item enqueueAll would queue.
func (f *fixture) syncAll(t *testing.T) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f.p.enqueueAll()
	for f.p.queue.Len() > 0 {
		it, _ := f.p.queue.Get()
		if err := f.p.sync(ctx, it); err != nil {
			t.Errorf("sync %v: %v", it, err)
		}
		f.p.queue.Done(it)
	}
}

// writes are the write actions on CSIStorageCapacity objects, as
// "verb name".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource != "csistoragecapacities" || a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get" {
			continue
		}
		name := ""
		switch a := a.(type) {
		case k8stesting.CreateAction: // and UpdateAction, the same methods
			name = a.GetObject().(*storagev1.CSIStorageCapacity).Name
		case k8stesting.DeleteAction:
			name = a.GetName()
		}
		out = append(out, a.GetVerb()+" "+name)
	}
	return out
}

func (f *fixture) get(t *testing.T, name string) *storagev1.CSIStorageCapacity {
	t.Helper()
	csc, err := f.client.StorageV1().CSIStorageCapacities(testNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return csc
}

func newSource() *source {
	return &source{nodes: map[string][]string{}, rooms: map[item][3]int64{}, shared: map[string]bool{}}
}

func TestCreatesOnePerClassAndNode(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a", "b"}
	src.setRoom("fast", "a", 1*gi, 3*gi, true)
	src.setRoom("fast", "b", 5*gi, 5*gi, true)
	immediate := wffcClass("immediate", testProvisioner)
	immediate.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	src.nodes["immediate"] = []string{"a"}
	src.setRoom("immediate", "a", gi, gi, true)
	src.nodes["other"] = []string{"a"}
	src.setRoom("other", "a", gi, gi, true)
	classes := []*storagev1.StorageClass{wffcClass("fast", testProvisioner), immediate, wffcClass("other", "someone.else")}
	f := newFixture(t, src, classes, nil, nil)

	f.syncAll(t)

	if got := f.writes(); len(got) != 2 {
		t.Fatalf("writes %v, want 2 creates (fast on a and b; no Immediate class, no other provisioner's)", got)
	}
	csc := f.get(t, f.p.Name("fast", "a"))
	if csc.StorageClassName != "fast" || csc.Capacity.Value() != 3*gi || csc.MaximumVolumeSize.Value() != 1*gi {
		t.Errorf("object for fast on a: class %s, capacity %v, maximumVolumeSize %v; want fast, 3Gi, 1Gi", csc.StorageClassName, csc.Capacity, csc.MaximumVolumeSize)
	}
	if want := map[string]string{corev1.LabelHostname: "a"}; csc.NodeTopology == nil || !maps.Equal(csc.NodeTopology.MatchLabels, want) {
		t.Errorf("nodeTopology %v, want matchLabels %v", csc.NodeTopology, want)
	}
	wantLabels := map[string]string{LabelManagedBy: ManagedBy, LabelProvisioner: testProvisioner, LabelClass: "fast", LabelNode: "a"}
	if !maps.Equal(csc.Labels, wantLabels) || csc.Annotations[AnnNode] != "a" {
		t.Errorf("labels %v, annotations %v; want %v and %s: a", csc.Labels, csc.Annotations, wantLabels, AnnNode)
	}
	if !strings.HasPrefix(csc.Name, NamePrefix) || csc.Name != f.p.Name("fast", "a") || f.p.Name("fast", "a") == f.p.Name("fast", "b") {
		t.Errorf("name %s: want %s and a hash of provisioner, class and node", csc.Name, NamePrefix)
	}
}

func TestUpdatesOnlyWhenRoomChanges(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a"}
	src.setRoom("fast", "a", 2*gi, 2*gi, true)
	f := newFixture(t, src, []*storagev1.StorageClass{wffcClass("fast", testProvisioner)}, nil, nil)
	f.syncAll(t)
	f.client.ClearActions()

	f.syncAll(t)
	f.syncAll(t)
	if got := f.writes(); len(got) != 0 {
		t.Fatalf("writes %v with the room unchanged, want none", got)
	}

	src.setRoom("fast", "a", 1*gi, 1*gi, true) // a 1Gi claim provisioned
	f.syncAll(t)
	f.syncAll(t)
	if got := f.writes(); len(got) != 1 || !strings.HasPrefix(got[0], "update ") {
		t.Fatalf("writes %v, want one update", got)
	}
	if csc := f.get(t, f.p.Name("fast", "a")); csc.Capacity.Value() != gi || csc.MaximumVolumeSize.Value() != gi {
		t.Errorf("capacity %v, maximumVolumeSize %v, want 1Gi both", csc.Capacity, csc.MaximumVolumeSize)
	}
	for verb, want := range map[string]float64{"create": 1, "update": 1, "delete": 0} {
		if got := testutil.ToFloat64(f.p.writes.WithLabelValues(verb)); got != want {
			t.Errorf("hostpath_csistoragecapacity_writes_total{verb=%q} = %v, want %v", verb, got, want)
		}
	}
}

func TestDeletesObjectsNoLongerServed(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a"} // b is no longer served
	src.setRoom("fast", "a", gi, gi, true)
	f0 := newFixture(t, src, nil, nil, nil)
	gone := f0.object("gone", "a", gi, gi) // its class was deleted
	oldNode := f0.object("fast", "b", gi, gi)
	current := f0.object("fast", "a", gi, gi)
	f := newFixture(t, src, []*storagev1.StorageClass{wffcClass("fast", testProvisioner)},
		[]*storagev1.CSIStorageCapacity{gone, oldNode, current}, nil)

	f.syncAll(t)

	got := f.writes()
	want := map[string]bool{"delete " + gone.Name: true, "delete " + oldNode.Name: true}
	if len(got) != 2 || !want[got[0]] || !want[got[1]] {
		t.Errorf("writes %v, want exactly the deletions of %v", got, want)
	}
}

func TestNeverTouchesForeignObjects(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a"}
	src.setRoom("fast", "a", gi, gi, true)
	f0 := newFixture(t, src, nil, nil, nil)

	// Another provisioner's object, for a class and node this one serves.
	foreign := f0.object("fast", "a", 9*gi, 9*gi)
	foreign.Name, foreign.Labels[LabelProvisioner] = "theirs", "other.example.com"
	// Our labels, but not a name of ours.
	renamed := f0.object("gone", "a", gi, gi)
	renamed.Name = "hostpath-someone-elses"
	// Our labels and name, but saying it is for another node: labels and
	// annotations are claims; the name derived from them must agree.
	forged := f0.object("fast", "a", 7*gi, 7*gi)
	forged.Annotations[AnnNode] = "z"
	forged.Labels[LabelNode] = "z"
	f := newFixture(t, src, []*storagev1.StorageClass{wffcClass("fast", testProvisioner)},
		[]*storagev1.CSIStorageCapacity{foreign, renamed, forged}, nil)

	_, ctx := ktesting.NewTestContext(t)
	f.p.enqueueAll()
	for f.p.queue.Len() > 0 {
		it, _ := f.p.queue.Get()
		_ = f.p.sync(ctx, it) // the forged object's item fails: it is left alone
		f.p.queue.Done(it)
	}
	if got := f.writes(); len(got) != 0 {
		t.Errorf("writes %v, want none: not one of these objects is this publisher's", got)
	}
	if csc := f.get(t, forged.Name); csc.Capacity.Value() != 7*gi {
		t.Errorf("forged object changed: %v", csc.Capacity)
	}
}

func TestSkipsNodesOfUnknownRoom(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a", "b"}
	src.setRoom("fast", "a", gi, gi, false) // helper pods, no pathCapacity
	src.setRoom("fast", "b", gi, gi, true)
	f0 := newFixture(t, src, nil, nil, nil)
	stale := f0.object("fast", "a", 5*gi, 5*gi) // from when a's room was known
	f := newFixture(t, src, []*storagev1.StorageClass{wffcClass("fast", testProvisioner)}, []*storagev1.CSIStorageCapacity{stale}, nil)

	f.syncAll(t)
	f.syncAll(t)

	got := f.writes()
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("writes %v, want the stale object of a deleted and b's created, once", got)
	}
	for _, w := range got {
		if w != "delete "+stale.Name && w != "create "+f.p.Name("fast", "b") {
			t.Errorf("unexpected write %s", w)
		}
	}
	if why := f.p.skipped[item{"fast", "a"}]; !strings.Contains(why, "unknown") {
		t.Errorf("skipped reason %q, want it to say the room is unknown", why)
	}
}

func TestNodeLocalPublishesOnlyItsNode(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a", "b"}
	src.setRoom("fast", "a", gi, gi, true)
	src.setRoom("fast", "b", gi, gi, true)
	f0 := newFixture(t, src, nil, nil, nil)
	other := f0.object("fast", "b", 3*gi, 3*gi) // node b's instance's
	f := newFixture(t, src, []*storagev1.StorageClass{wffcClass("fast", testProvisioner)},
		[]*storagev1.CSIStorageCapacity{other}, func(c *Config) { c.Node = "a" })

	f.syncAll(t)

	if got := f.writes(); len(got) != 1 || got[0] != "create "+f.p.Name("fast", "a") {
		t.Errorf("writes %v, want only node a's object created", got)
	}
	if sel := f.p.Selector().String(); !strings.Contains(sel, LabelNode+"=a") {
		t.Errorf("selector %s, want it to select node a's objects only", sel)
	}
}

func TestTopologyOfOtherLabelKeysAndSharedPaths(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a"}
	src.nodes["nfs"] = []string{"a"}
	src.shared["nfs"] = true
	src.setRoom("fast", "a", gi, gi, true)
	src.setRoom("nfs", "a", gi, gi, true)
	f := newFixture(t, src, []*storagev1.StorageClass{wffcClass("fast", testProvisioner), wffcClass("nfs", testProvisioner)}, nil,
		func(c *Config) { c.NodeLabelKey = "example.com/disk-node" })
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"example.com/disk-node": "disk-a"}}}
	if err := f.p.cfg.Informers.Core().V1().Nodes().Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}

	f.syncAll(t)

	if got := f.get(t, f.p.Name("fast", "a")).NodeTopology.MatchLabels; !maps.Equal(got, map[string]string{"example.com/disk-node": "disk-a"}) {
		t.Errorf("fast: matchLabels %v, want the node's value of --node-label-key", got)
	}
	if got := f.get(t, f.p.Name("nfs", "a")).NodeTopology; got == nil || len(got.MatchLabels) != 0 || len(got.MatchExpressions) != 0 {
		t.Errorf("shared class: nodeTopology %v, want an empty selector (every node)", got)
	}
}

func TestLabelValuesOfLongNames(t *testing.T) {
	long := strings.Repeat("n", 70) + ".example.com"
	v := labelValue(long)
	if v == long || len(v) > 63 || labelValue(long) != v {
		t.Errorf("labelValue of a %d-character name = %q: want a stable valid label value", len(long), v)
	}
	if got := labelValue("node-1"); got != "node-1" {
		t.Errorf("labelValue(node-1) = %q", got)
	}
}

// TestRun: started, the publisher creates what is missing and deletes what
// is stale, and makes again an object someone deleted.
func TestRun(t *testing.T) {
	src := newSource()
	src.nodes["fast"] = []string{"a"}
	src.setRoom("fast", "a", gi, 2*gi, true)
	f0 := newFixture(t, src, nil, nil, nil)
	stale := f0.object("fast", "gone-node", gi, gi)
	client := fake.NewClientset(wffcClass("fast", testProvisioner), stale)
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := New(Config{Provisioner: testProvisioner, Namespace: testNamespace, Client: client, Informers: factory, Source: src, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		factory.Shutdown()
	}()

	objects := client.StorageV1().CSIStorageCapacities(testNamespace)
	waitFor := func(what string, cond func(*storagev1.CSIStorageCapacityList) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := objects.List(ctx, metav1.ListOptions{})
			return err == nil && cond(list), nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	only := func(list *storagev1.CSIStorageCapacityList) bool {
		return len(list.Items) == 1 && list.Items[0].Name == p.Name("fast", "a") && list.Items[0].Capacity.Value() == 2*gi
	}
	waitFor("the object of fast on a created and the stale one deleted", only)
	if err := objects.Delete(ctx, p.Name("fast", "a"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the deleted object made again", only)
}
