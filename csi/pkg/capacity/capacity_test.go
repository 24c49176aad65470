// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const (
	driverName = "capacity.test.kubeprov.io"
	namespace  = "csi"
	zoneKey    = "topology.test/zone"
)

// fakeDriver answers GetCapacity from a capacity per zone ("" without
// topology), minus 1 GiB for classes with parameter small=true.
type fakeDriver struct {
	mu       sync.Mutex
	capacity map[string]int64
	maxSize  *int64
	fail     bool
	requests []*csi.GetCapacityRequest
}

func (d *fakeDriver) GetCapacity(_ context.Context, req *csi.GetCapacityRequest, _ ...grpc.CallOption) (*csi.GetCapacityResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, req)
	if d.fail {
		return nil, status.Error(codes.Unavailable, "backend down")
	}
	avail := d.capacity[req.GetAccessibleTopology().GetSegments()[zoneKey]]
	if req.GetParameters()["small"] == "true" {
		avail -= 1 << 30
	}
	rsp := &csi.GetCapacityResponse{AvailableCapacity: avail}
	if d.maxSize != nil {
		rsp.MaximumVolumeSize = wrapperspb.Int64(*d.maxSize)
	}
	return rsp, nil
}

func (d *fakeDriver) set(f func(d *fakeDriver)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *fakeDriver) lastRequest() *csi.GetCapacityRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.requests) == 0 {
		return nil
	}
	return d.requests[len(d.requests)-1]
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	driver   *fakeDriver
	registry *prometheus.Registry
}

// start runs a controller on objects with cfg (DriverName, Driver, Client,
// Informers and Namespace filled in) until the test ends.
func start(t *testing.T, cfg Config, objects ...runtime.Object) *fixture {
	t.Helper()
	return startWith(t, cfg, func(*fake.Clientset) {}, objects...)
}

// startWith is start with reactors added to the client first.
func startWith(t *testing.T, cfg Config, react func(*fake.Clientset), objects ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(objects...)
	react(client)
	// The API server makes names from generateName; the fake does not.
	var names atomic.Int64
	client.PrependReactor("create", "csistoragecapacities", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if obj, ok := action.(clienttesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity); ok && obj.Name == "" {
			obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, names.Add(1))
		}
		return false, nil, nil
	})
	driver := &fakeDriver{capacity: map[string]int64{"": 100 << 30, "a": 10 << 30, "b": 20 << 30}}
	registry := prometheus.NewRegistry()
	factory := informers.NewSharedInformerFactory(client, 0)
	cfg.DriverName, cfg.Driver, cfg.Client, cfg.Informers, cfg.Namespace, cfg.Registerer = driverName, driver, client, factory, namespace, registry
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
	return &fixture{t: t, ctx: ctx, client: client, driver: driver, registry: registry}
}

func class(name string, mode storagev1.VolumeBindingMode, params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: driverName, VolumeBindingMode: &mode, Parameters: params}
}

func node(name, zone string, registered bool) []runtime.Object {
	out := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zoneKey: zone}}}}
	if registered {
		out = append(out, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "other.driver", NodeID: name},
			{Name: driverName, NodeID: name, TopologyKeys: []string{zoneKey}},
		}}})
	}
	return out
}

// published describes the managed objects as "class zone capacity[/max]",
// sorted; zone is * for an empty selector.
func (f *fixture) published() []string {
	f.t.Helper()
	list, err := f.client.StorageV1().CSIStorageCapacities(namespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.Labels[DriverNameLabel] != driverName || c.Labels[ManagedByLabel] != DefaultManagedBy {
			continue
		}
		zone := "*"
		if c.NodeTopology == nil {
			zone = "nil"
		} else if len(c.NodeTopology.MatchLabels) > 0 {
			zone = c.NodeTopology.MatchLabels[zoneKey]
		}
		s := fmt.Sprintf("%s %s %s", c.StorageClassName, zone, c.Capacity)
		if c.MaximumVolumeSize != nil {
			s += "/" + c.MaximumVolumeSize.String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// expect waits until the published objects are want.
func (f *fixture) expect(want ...string) {
	f.t.Helper()
	slices.Sort(want)
	var got []string
	err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = f.published()
		return slices.Equal(got, want), nil
	})
	if err != nil {
		f.t.Fatalf("published %q, want %q", got, want)
	}
}

func TestPublishesPerClassAndSegment(t *testing.T) {
	foreign := &storagev1.CSIStorageCapacity{
		ObjectMeta:       metav1.ObjectMeta{Name: "foreign", Namespace: namespace, Labels: map[string]string{DriverNameLabel: driverName, ManagedByLabel: "someone-else"}},
		StorageClassName: "gone",
	}
	objects := []runtime.Object{
		class("fast", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{"small": "true", "csi.storage.k8s.io/fstype": "xfs"}),
		class("immediate", storagev1.VolumeBindingImmediate, nil),
		foreign,
	}
	other := class("other-driver", storagev1.VolumeBindingWaitForFirstConsumer, nil)
	other.Provisioner = "other.driver"
	objects = append(objects, other)
	objects = append(objects, node("n1", "a", true)...)
	objects = append(objects, node("n2", "b", true)...)
	objects = append(objects, node("n3", "b", true)...)  // same segment: one object
	objects = append(objects, node("n4", "c", false)...) // driver not there
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "csi-controller-1", UID: "uid-rs", Controller: ptr.To(true)}
	f := start(t, Config{Topology: true, Owner: owner}, objects...)
	f.expect("fast a 9Gi", "fast b 19Gi")

	req := f.driver.lastRequest()
	if !maps.Equal(req.GetParameters(), map[string]string{"small": "true"}) {
		t.Errorf("GetCapacity parameters %v, want the class's without reserved keys", req.GetParameters())
	}
	list, _ := f.client.StorageV1().CSIStorageCapacities(namespace).List(f.ctx, metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + DefaultManagedBy})
	for _, c := range list.Items {
		if !strings.HasPrefix(c.Name, "csisc-") && c.GenerateName != "csisc-" {
			t.Errorf("object %s not named csisc-*", c.Name)
		}
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != "uid-rs" {
			t.Errorf("object %s owner references %v, want the ReplicaSet", c.Name, c.OwnerReferences)
		}
		if len(c.NodeTopology.MatchLabels) != 1 || len(c.NodeTopology.MatchExpressions) != 0 {
			t.Errorf("object %s node topology %v, want the zone label only", c.Name, c.NodeTopology)
		}
	}

	// The driver's capacity changes: seen at the next poll.
	f.driver.set(func(d *fakeDriver) { d.capacity["a"] = 5 << 30; d.maxSize = ptr.To[int64](3 << 30) })
	f.expect("fast a 4Gi/3Gi", "fast b 19Gi/3Gi")

	// A new segment appears, an old one goes.
	for _, o := range node("n5", "c", true) {
		if n, ok := o.(*corev1.Node); ok {
			n.Labels[zoneKey] = "a"
			_, _ = f.client.CoreV1().Nodes().Create(f.ctx, n, metav1.CreateOptions{})
		} else {
			_, _ = f.client.StorageV1().CSINodes().Create(f.ctx, o.(*storagev1.CSINode), metav1.CreateOptions{})
		}
	}
	if err := f.client.StorageV1().CSINodes().Delete(f.ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("fast a 4Gi/3Gi", "fast b 19Gi/3Gi") // n5 keeps zone a alive
	if err := f.client.StorageV1().CSINodes().Delete(f.ctx, "n5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("fast b 19Gi/3Gi")

	// A new class gets objects, a deleted one loses them.
	if _, err := f.client.StorageV1().StorageClasses().Create(f.ctx, class("slow", storagev1.VolumeBindingWaitForFirstConsumer, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("fast b 19Gi/3Gi", "slow b 20Gi/3Gi")
	if err := f.client.StorageV1().StorageClasses().Delete(f.ctx, "fast", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("slow b 20Gi/3Gi")

	if _, err := f.client.StorageV1().CSIStorageCapacities(namespace).Get(f.ctx, "foreign", metav1.GetOptions{}); err != nil {
		t.Errorf("another producer's object was touched: %v", err)
	}
}

func TestWithoutTopologyAndImmediate(t *testing.T) {
	f := start(t, Config{ForImmediateBinding: true},
		class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, nil),
		class("immediate", storagev1.VolumeBindingImmediate, nil))
	f.expect("immediate * 100Gi", "wffc * 100Gi")
	if req := f.driver.lastRequest(); req.GetAccessibleTopology() != nil {
		t.Errorf("accessible topology %v for a driver without topology", req.GetAccessibleTopology())
	}
}

func TestFailingGetCapacityKeepsTheObject(t *testing.T) {
	objects := append([]runtime.Object{class("fast", storagev1.VolumeBindingWaitForFirstConsumer, nil)}, node("n1", "a", true)...)
	f := start(t, Config{Topology: true}, objects...)
	f.expect("fast a 10Gi")
	f.driver.set(func(d *fakeDriver) { d.fail = true; d.capacity["a"] = 1 << 30 })
	err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n, err := testutil.GatherAndCount(f.registry, "csistoragecapacity_getcapacity_failures_total")
		return err == nil && n > 0, nil
	})
	if err != nil {
		t.Fatal("no failure counted")
	}
	f.expect("fast a 10Gi")
	f.driver.set(func(d *fakeDriver) { d.fail = false })
	f.expect("fast a 1Gi")
}

func TestDeletedObjectIsRecreatedAndDuplicatesRemoved(t *testing.T) {
	f := start(t, Config{}, class("fast", storagev1.VolumeBindingWaitForFirstConsumer, nil))
	f.expect("fast * 100Gi")
	list, _ := f.client.StorageV1().CSIStorageCapacities(namespace).List(f.ctx, metav1.ListOptions{})
	dup := list.Items[0].DeepCopy()
	dup.Name, dup.UID, dup.ResourceVersion = "csisc-dup", "uid-dup", ""
	if _, err := f.client.StorageV1().CSIStorageCapacities(namespace).Create(f.ctx, dup, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("fast * 100Gi")
	if err := f.client.StorageV1().CSIStorageCapacities(namespace).Delete(f.ctx, list.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("fast * 100Gi")
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "DriverName") || !strings.Contains(err.Error(), "Namespace") {
		t.Errorf("New(empty config) = %v, want errors naming DriverName and Namespace", err)
	}
}

// gauges reads the object count gauges as "goal current obsolete".
func (f *fixture) gauges() string {
	f.t.Helper()
	families, err := f.registry.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	values := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			values[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	return fmt.Sprintf("%v %v %v", values["csistoragecapacities_desired_goal"], values["csistoragecapacities_desired_current"], values["csistoragecapacities_obsolete"])
}

// TestObjectCountGauges: upstream's gauges count the objects wanted, those
// of them that exist, and the managed ones that should not exist (here one
// whose deletion the API server keeps refusing).
func TestObjectCountGauges(t *testing.T) {
	obsolete := &storagev1.CSIStorageCapacity{
		ObjectMeta:       metav1.ObjectMeta{Name: "obsolete", Namespace: namespace, Labels: map[string]string{DriverNameLabel: driverName, ManagedByLabel: DefaultManagedBy}},
		StorageClassName: "gone",
	}
	objects := append([]runtime.Object{class("fast", storagev1.VolumeBindingWaitForFirstConsumer, nil), obsolete}, node("n1", "a", true)...)
	objects = append(objects, node("n2", "b", true)...)
	f := startWith(t, Config{Topology: true}, func(client *fake.Clientset) {
		client.PrependReactor("delete", "csistoragecapacities", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.(clienttesting.DeleteAction).GetName() == obsolete.Name {
				return true, nil, errors.New("refused")
			}
			return false, nil, nil
		})
	}, objects...)
	f.expect("fast a 10Gi", "fast b 20Gi", "gone nil <nil>")
	// The gauges count the controller's informer cache, which sees an object
	// a moment after the API answered its create: wait for it as a scrape
	// would, instead of reading once.
	const want = "2 2 1"
	got := f.gauges()
	for deadline := time.Now().Add(10 * time.Second); got != want && time.Now().Before(deadline); got = f.gauges() {
		time.Sleep(10 * time.Millisecond)
	}
	if got != want {
		t.Errorf("gauges goal, current, obsolete: %s, want %s", got, want)
	}
}

// TestNodeInstance: a node's instance publishes its node's segment only,
// under its own managed-by value.
func TestNodeInstance(t *testing.T) {
	objects := append([]runtime.Object{class("fast", storagev1.VolumeBindingWaitForFirstConsumer, nil)}, node("n1", "a", true)...)
	objects = append(objects, node("n2", "b", true)...)
	f := start(t, Config{Topology: true, NodeName: "n1"}, objects...)
	var got []string
	err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		list, err := f.client.StorageV1().CSIStorageCapacities(namespace).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = nil
		for _, c := range list.Items {
			got = append(got, c.Labels[ManagedByLabel]+" "+c.NodeTopology.MatchLabels[zoneKey])
		}
		return slices.Equal(got, []string{"external-provisioner-n1 a"}), nil
	})
	if err != nil {
		t.Fatalf("objects (managed-by zone) %q, want [external-provisioner-n1 a]", got)
	}
}
