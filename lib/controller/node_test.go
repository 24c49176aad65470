// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	"github.com/kubeprov/external-storage/lib/internal/cachedecode"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeReadingStore reads the selected node, as node-local provisioners do.
type nodeReadingStore struct{ *dirStore }

func (nodeReadingStore) ReadsSelectedNode() bool { return true }

func lateClass() *storagev1.StorageClass {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	return class("late", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })
}

func claimOnNode(node string) *corev1.PersistentVolumeClaim {
	return claim("c", "late", func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnSelectedNode] = node })
}

func TestSelectedNodeComesFromTheCache(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"topology.kubernetes.io/zone": "z1"}},
		Status:     corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1 << 30}}},
	}
	store := newStore(t)
	f := newFixture(t, nodeReadingStore{store}, nil, lateClass(), claimOnNode("node-1"), node)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if len(store.provisions) != 1 {
		t.Fatalf("%d Provision calls, want 1", len(store.provisions))
	}
	got := store.provisions[0].SelectedNode
	if got == nil || got.Name != "node-1" || got.Labels["topology.kubernetes.io/zone"] != "z1" {
		t.Fatalf("ProvisionOptions.SelectedNode = %+v, want node-1 with its zone label", got)
	}
	if n := f.writes("get", "nodes"); n != 0 {
		t.Errorf("%d GETs of nodes: a cached node must cost no API call", n)
	}
}

func TestSelectedNodeGoneReschedules(t *testing.T) {
	store := newStore(t)
	f := newFixture(t, nodeReadingStore{store}, nil, lateClass(), claimOnNode("gone"))
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if n := store.provisionCount(); n != 0 {
		t.Fatalf("Provision called %d times for a node that does not exist", n)
	}
	f.requireEvent(EventProvisioningFailed, "Selected node gone no longer exists, asking the scheduler for another node")
	live, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(f.ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := live.Annotations[AnnSelectedNode]; ok {
		t.Fatal("selected-node annotation kept: the scheduler is never asked again")
	}
}

func TestNoNodeCacheUnlessAsked(t *testing.T) {
	store := newStore(t)
	f := newFixture(t, store, nil, lateClass(), claimOnNode("node-1"))
	if f.c.nodeInformer != nil {
		t.Fatal("a Node informer for a provisioner that does not read nodes")
	}
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if len(store.provisions) != 1 || store.provisions[0].SelectedNode != nil || store.provisions[0].SelectedNodeName != "node-1" {
		t.Fatalf("provisions %+v, want one with SelectedNodeName node-1 and no SelectedNode", store.provisions)
	}
}

func TestCachedNodesKeepWhatProvisionersRead(t *testing.T) {
	full := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "z1"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
			Images:     []corev1.ContainerImage{{Names: []string{"big"}}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	obj, err := cachedecode.Trim(full, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*corev1.Node)
	if n.Labels["zone"] != "z1" || len(n.Spec.Taints) != 1 || len(n.Status.Addresses) != 1 {
		t.Errorf("cached node lost what provisioners read: %+v", n)
	}
	if len(n.Status.Images) != 0 || len(n.Status.Conditions) != 0 {
		t.Errorf("cached node keeps images or conditions: %+v", n.Status)
	}
}
