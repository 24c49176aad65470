// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// The controller's own informers keep of settled objects only what the
// controller reads, and everything of the objects it works on.
func TestCacheTrimsOnlySettledObjects(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	now := metav1.Now()
	unbound := claim("unbound", "gold", func(c *corev1.PersistentVolumeClaim) { c.ManagedFields = managed })
	bound := claim("bound", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.ManagedFields = managed
		c.Spec.VolumeName = "pvc-uid-bound"
		c.Status.Phase = corev1.ClaimBound
	})
	deleting := bound.DeepCopy()
	deleting.DeletionTimestamp = &now
	boundPV := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-bound", UID: "pv-uid", ResourceVersion: "7", ManagedFields: managed,
			Annotations: map[string]string{AnnProvisionedBy: testProvisioner}, Finalizers: []string{VolumeFinalizer}},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:                      &corev1.ObjectReference{Namespace: "ns", Name: "bound", UID: bound.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "gold",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pvc-uid-bound"}},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	released := boundPV.DeepCopy()
	released.Status.Phase = corev1.VolumeReleased
	deletedPV := boundPV.DeepCopy()
	deletedPV.DeletionTimestamp = &now

	withoutManaged := func(obj metav1.Object) any {
		obj.SetManagedFields(nil)
		return obj
	}
	tests := []struct {
		name string
		in   metav1.Object
		want any
	}{
		{"unbound claim: all of it", unbound.DeepCopy(), withoutManaged(unbound.DeepCopy())},
		{"claim being deleted: all of it", deleting.DeepCopy(), withoutManaged(deleting.DeepCopy())},
		{"bound claim: identity and volume", bound.DeepCopy(), &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "ns", UID: bound.UID, ResourceVersion: "1"},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-uid-bound"},
		}},
		{"released PV: all of it, for Delete", released.DeepCopy(), withoutManaged(released.DeepCopy())},
		{"PV deleted before its claim: all of it, for Delete", deletedPV.DeepCopy(), withoutManaged(deletedPV.DeepCopy())},
		{"bound PV: what says when it becomes ours to delete", boundPV.DeepCopy(), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-bound", UID: "pv-uid", ResourceVersion: "7",
				Annotations: map[string]string{AnnProvisionedBy: testProvisioner}},
			Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "bound", UID: bound.UID}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}},
		{"bound PV of another provisioner: no annotation", func() metav1.Object {
			pv := boundPV.DeepCopy()
			pv.Annotations = map[string]string{"other": "x"}
			pv.Spec.ClaimRef = nil
			return pv
		}(), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-bound", UID: "pv-uid", ResourceVersion: "7"},
			Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trimForCache(tt.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cached object (-want +got):\n%s", diff)
			}
		})
	}
}

// A provisioner that reads volumes itself keeps what it reads of bound PVs.
func TestCacheKeepsWhatTheProvisionerReads(t *testing.T) {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv"},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/share/a"}},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	got, err := trimForCache(pv.DeepCopy(), func(full, cached *corev1.PersistentVolume) { cached.Spec.NFS = full.Spec.NFS })
	if err != nil {
		t.Fatal(err)
	}
	cached := got.(*corev1.PersistentVolume)
	if diff := cmp.Diff(pv.Spec.NFS, cached.Spec.NFS); diff != "" {
		t.Errorf("kept NFS source (-want +got):\n%s", diff)
	}
	if cached.Spec.Capacity != nil {
		t.Errorf("capacity cached: %v", cached.Spec.Capacity)
	}
}

// The informers the controller creates itself, and those of
// NewInformerFactory, use the trimming transform; other injected ones, shared
// with other code, only lose managed fields.
func TestTrimmingOnlyInOwnInformers(t *testing.T) {
	bound := claim("bound", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = "pv"
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	})
	for _, tt := range []struct {
		name         string
		opts         func(kubernetes.Interface) []Option
		wantRequests bool
	}{
		{"own informers", func(kubernetes.Interface) []Option { return nil }, false},
		{"injected informers", func(c kubernetes.Interface) []Option {
			return []Option{WithInformerFactory(informers.NewSharedInformerFactory(c, 0))}
		}, true},
		{"injected NewInformerFactory", func(c kubernetes.Interface) []Option {
			return []Option{WithInformerFactory(NewInformerFactory(c, 0, nil))}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			client := fake.NewClientset(bound.DeepCopy())
			c, err := NewProvisionController(client, testProvisioner, newStore(t), tt.opts(client)...)
			if err != nil {
				t.Fatal(err)
			}
			c.factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), c.claimInformer.HasSynced) {
				t.Fatal("claim cache did not sync")
			}
			got, err := c.claims.PersistentVolumeClaims("ns").Get("bound")
			if err != nil {
				t.Fatal(err)
			}
			if got.ManagedFields != nil {
				t.Errorf("managed fields cached: %v", got.ManagedFields)
			}
			if has := got.Spec.Resources.Requests != nil; has != tt.wantRequests {
				t.Errorf("cached bound claim has requests: %v, want %v", has, tt.wantRequests)
			}
		})
	}
}

// A PV whose first sight ends its provisioning operation may already be
// released (the claim was deleted while a repeated Provision saved it again):
// that event is the only one, so it must still queue the deletion.
func TestReleasedPVEndingItsOperationIsDeleted(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	c := claim("c", "gold")
	f.c.operations.track("pvc-uid-c", "ns/c", journalEntry{Claim: c}, false)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-c", Annotations: map[string]string{AnnProvisionedBy: testProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:                      &corev1.ObjectReference{Namespace: "ns", Name: "c", UID: c.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
	f.c.volumeChanged(pv)
	if f.c.operations.hasClaim("ns/c") {
		t.Error("the operation did not end when its PV appeared")
	}
	if f.c.volumeQueue.Len() != 1 {
		t.Errorf("released PV not queued for deletion: %d queued", f.c.volumeQueue.Len())
	}
}
