// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nodedeployment

import (
	"context"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
	"github.com/kubeprov/external-storage/lib/controller"
)

const (
	thisNode = "node-a"
	zoneKey  = "topology.example.com/zone"
	base     = 20 * time.Second
	maxDelay = 60 * time.Second
)

type fixture struct {
	p      *Provisioner
	client *fake.Clientset
	now    time.Time
	ctx    context.Context
}

func newFixture(t *testing.T, immediate bool, objects ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objects...)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objects {
		switch o.(type) {
		case *corev1.Node:
			_ = nodes.Add(o)
		case *storagev1.StorageClass:
			_ = classes.Add(o)
		}
	}
	inner, err := provisioner.New(provisioner.Config{DriverName: "d.example.com", Controller: csi.NewControllerClient(nil), Client: client,
		Informers: informers.NewSharedInformerFactory(client, 0)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{client: client, now: time.Unix(1_000_000, 0), ctx: ctx}
	f.p, err = New(inner, Config{
		NodeName: thisNode, ImmediateBinding: immediate, BaseDelay: base, MaxDelay: maxDelay,
		Client: client, Nodes: corelisters.NewNodeLister(nodes), Classes: storagelisters.NewStorageClassLister(classes),
		Now: func() time.Time { return f.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func node(zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: thisNode, Labels: map[string]string{zoneKey: zone}}}
}

func class(name string, mode storagev1.VolumeBindingMode, allowedZones ...string) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "d.example.com", VolumeBindingMode: &mode}
	if len(allowedZones) > 0 {
		c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: zoneKey, Values: allowedZones},
		}}}
	}
	return c
}

func claim(className, selectedNode string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c", ResourceVersion: "7", Annotations: map[string]string{}},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(className)},
	}
	if selectedNode != "" {
		c.Annotations[controller.AnnSelectedNode] = selectedNode
	}
	return c
}

// patches returns the claim patches sent so far.
func (f *fixture) patches() []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range f.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "persistentvolumeclaims" {
			out = append(out, p)
		}
	}
	return out
}

func TestSelectedNodeDecides(t *testing.T) {
	for name, tc := range map[string]struct {
		immediate bool
		class     *storagev1.StorageClass
		selected  string
		want      bool
	}{
		"this node, WaitForFirstConsumer":     {class: class("late", storagev1.VolumeBindingWaitForFirstConsumer), selected: thisNode, want: true},
		"another node, WaitForFirstConsumer":  {class: class("late", storagev1.VolumeBindingWaitForFirstConsumer), selected: "node-b"},
		"this node, Immediate":                {immediate: true, class: class("now", storagev1.VolumeBindingImmediate), selected: thisNode, want: true},
		"another node, Immediate":             {immediate: true, class: class("now", storagev1.VolumeBindingImmediate), selected: "node-b"},
		"Immediate without immediate binding": {class: class("now", storagev1.VolumeBindingImmediate)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.immediate, node("z1"), tc.class)
			ok, retry := f.p.QualifyClaim(f.ctx, claim(tc.class.Name, tc.selected))
			if ok != tc.want || retry != 0 {
				t.Errorf("QualifyClaim = %v, retry after %v; want %v, no retry", ok, retry, tc.want)
			}
			if n := len(f.patches()); n != 0 {
				t.Errorf("%d claim patches, want none", n)
			}
		})
	}
}

func TestImmediateClaimIsSelectedAfterTheDelay(t *testing.T) {
	c := claim("now", "")
	f := newFixture(t, true, node("z1"), class("now", storagev1.VolumeBindingImmediate), c)
	ok, retry := f.p.QualifyClaim(f.ctx, c)
	if ok || retry != base {
		t.Fatalf("first look: %v, retry after %v; want false, %v", ok, retry, base)
	}
	if n := len(f.patches()); n != 0 {
		t.Fatalf("claim patched before the delay (%d patches)", n)
	}
	f.now = f.now.Add(base / 2) // looked at again early (another event)
	if ok, retry := f.p.QualifyClaim(f.ctx, c); ok || retry != base/2 {
		t.Fatalf("half way: %v, retry after %v; want false, %v", ok, retry, base/2)
	}
	f.now = f.now.Add(base / 2)
	ok, retry = f.p.QualifyClaim(f.ctx, c)
	if ok || retry != 2*base {
		t.Fatalf("after the delay: %v, retry after %v; want false (the informer brings the claim back), %v", ok, retry, 2*base)
	}
	patches := f.patches()
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1", len(patches))
	}
	want := `{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"node-a"},"resourceVersion":"7"}}`
	if got := string(patches[0].GetPatch()); got != want {
		t.Errorf("patch %s, want %s", got, want)
	}
	live, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(f.ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.p.QualifyClaim(f.ctx, live); !ok {
		t.Error("the claim with this node selected does not qualify")
	}
}

func TestConflictIsALostRaceAndTheDelayGrows(t *testing.T) {
	c := claim("now", "")
	f := newFixture(t, true, node("z1"), class("now", storagev1.VolumeBindingImmediate), c)
	f.client.PrependReactor("patch", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, "c", nil)
	})
	_, retry := f.p.QualifyClaim(f.ctx, c)
	var delays []time.Duration
	for range 4 {
		f.now = f.now.Add(retry)
		var ok bool
		ok, retry = f.p.QualifyClaim(f.ctx, c)
		if ok {
			t.Fatal("a claim lost to another instance qualifies")
		}
		delays = append(delays, retry)
	}
	want := []time.Duration{2 * base, maxDelay, maxDelay, maxDelay}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays after each lost attempt %v, want %v", delays, want)
		}
	}
	if n := len(f.patches()); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}
	// The winner's node arrives through the informer: no more attempts.
	if ok, retry := f.p.QualifyClaim(f.ctx, claim("now", "node-b")); ok || retry != 0 {
		t.Errorf("claim of node-b: %v, retry after %v; want false, no retry", ok, retry)
	}
}

func TestDelayDoublesUpToTheMaximum(t *testing.T) {
	f := newFixture(t, true)
	want := []time.Duration{base, 2 * base, maxDelay, maxDelay}
	for n, w := range want {
		if got := f.p.delay(n); got != w {
			t.Errorf("delay(%d) = %v, want %v", n, got, w)
		}
	}
	if got := f.p.delay(1000); got != maxDelay {
		t.Errorf("delay(1000) = %v, want %v", got, maxDelay)
	}
}

func TestAllowedTopologies(t *testing.T) {
	for name, tc := range map[string]struct {
		allowed []string
		compete bool
	}{
		"no allowedTopologies":         {compete: true},
		"this node's zone allowed":     {allowed: []string{"z0", "z1"}, compete: true},
		"this node's zone not allowed": {allowed: []string{"z2"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := claim("now", "")
			f := newFixture(t, true, node("z1"), class("now", storagev1.VolumeBindingImmediate, tc.allowed...), c)
			_, retry := f.p.QualifyClaim(f.ctx, c)
			f.now = f.now.Add(retry)
			ok, _ := f.p.QualifyClaim(f.ctx, c)
			if ok {
				t.Fatal("an unselected Immediate claim qualifies")
			}
			if got := len(f.patches()) == 1; got != tc.compete {
				t.Errorf("tried to select this node: %v, want %v (retry after %v)", got, tc.compete, retry)
			}
			if !tc.compete && retry != 0 {
				t.Errorf("retry after %v for a class this node can never serve", retry)
			}
		})
	}
}

func TestProvisionOfAnotherNodeIsIgnored(t *testing.T) {
	f := newFixture(t, true)
	_, _, err := f.p.Provision(f.ctx, controller.ProvisionOptions{PVName: "pv", PVC: claim("now", "node-b"), SelectedNodeName: "node-b"})
	if !controller.IsIgnored(err) {
		t.Fatalf("Provision for another node: %v, want an IgnoredError", err)
	}
}

func TestShouldDeleteOnlyVolumesOfThisNode(t *testing.T) {
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	for name, tc := range map[string]struct {
		affinity *corev1.VolumeNodeAffinity
		want     bool
	}{
		"no node affinity":            {want: true},
		"this node's zone":            {affinity: affinity(expr(zoneKey, corev1.NodeSelectorOpIn, "z1")), want: true},
		"another zone":                {affinity: affinity(expr(zoneKey, corev1.NodeSelectorOpIn, "z2"))},
		"one of the terms":            {affinity: affinity(expr(zoneKey, corev1.NodeSelectorOpIn, "z2"), expr(zoneKey, corev1.NodeSelectorOpIn, "z1")), want: true},
		"NotIn this zone":             {affinity: affinity(expr(zoneKey, corev1.NodeSelectorOpNotIn, "z1"))},
		"label missing":               {affinity: affinity(expr("rack", corev1.NodeSelectorOpExists))},
		"this node by name":           {affinity: affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{thisNode}}}}), want: true},
		"both requirements of a term": {affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}, {Key: "rack", Operator: corev1.NodeSelectorOpExists}}})},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, true, node("z1"))
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: tc.affinity}}
			if got := f.p.ShouldDelete(f.ctx, pv); got != tc.want {
				t.Errorf("ShouldDelete = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeNotInTheCacheDeletesNothing(t *testing.T) {
	f := newFixture(t, true)
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpExists}}}},
	}}}}
	if f.p.ShouldDelete(f.ctx, pv) {
		t.Error("deleting without knowing this node's labels")
	}
}
