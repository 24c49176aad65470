// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloneprotection

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
)

func TestSync(t *testing.T) {
	claim := func(name, volume string, finalizers ...string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Finalizers: finalizers},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume},
		}
	}
	cloneOf := func(c *corev1.PersistentVolumeClaim, source string) *corev1.PersistentVolumeClaim {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source}
		return c
	}
	tests := []struct {
		name     string
		clones   []*corev1.PersistentVolumeClaim
		wantKept bool
	}{
		{name: "a clone pending", clones: []*corev1.PersistentVolumeClaim{cloneOf(claim("c1", ""), "src")}, wantKept: true},
		{name: "the clone bound", clones: []*corev1.PersistentVolumeClaim{cloneOf(claim("c1", "pv-c1"), "src")}},
		{name: "no clone left"},
		{name: "a pending clone of another claim", clones: []*corev1.PersistentVolumeClaim{cloneOf(claim("c1", ""), "other")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset(claim("src", "pv-src", "kubernetes.io/pvc-protection", provisioner.CloningProtectionFinalizer))
			factory := informers.NewSharedInformerFactory(client, 0)
			c, err := New(client, factory.Core().V1().PersistentVolumeClaims(), 1)
			if err != nil {
				t.Fatal(err)
			}
			store := factory.Core().V1().PersistentVolumeClaims().Informer().GetStore()
			for _, clone := range tc.clones {
				if err := store.Add(clone); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.sync(ctx, cache.ObjectName{Namespace: "ns", Name: "src"}); err != nil {
				t.Fatal(err)
			}
			src, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "src", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kept := slices.Contains(src.Finalizers, provisioner.CloningProtectionFinalizer); kept != tc.wantKept {
				t.Errorf("finalizer kept %v, want %v (finalizers %v)", kept, tc.wantKept, src.Finalizers)
			}
			if !slices.Contains(src.Finalizers, "kubernetes.io/pvc-protection") {
				t.Errorf("other finalizers lost: %v", src.Finalizers)
			}
		})
	}
}
