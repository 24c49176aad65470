// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloneprotection

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

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
	// fromNamespace moves a clone of "src" into namespace ns.
	fromNamespace := func(ns string, c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c.Namespace = ns
		c.Spec.DataSourceRef.Namespace = ptr.To("ns")
		return c
	}
	grantTo := func(ns string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
			"metadata": map[string]any{"name": "clones-for-" + ns, "namespace": "ns"},
			"spec": map[string]any{
				"from": []any{map[string]any{"group": "", "kind": "PersistentVolumeClaim", "namespace": ns}},
				"to":   []any{map[string]any{"group": "", "kind": "PersistentVolumeClaim", "name": "src"}},
			},
		}}
	}
	tests := []struct {
		name     string
		clones   []*corev1.PersistentVolumeClaim
		grants   []*unstructured.Unstructured
		disabled bool // feature gate CrossNamespaceVolumeDataSource off
		wantKept bool
	}{
		{name: "a clone pending", clones: []*corev1.PersistentVolumeClaim{cloneOf(claim("c1", ""), "src")}, wantKept: true},
		{name: "the clone bound", clones: []*corev1.PersistentVolumeClaim{cloneOf(claim("c1", "pv-c1"), "src")}},
		{name: "no clone left"},
		{name: "a pending clone of another claim", clones: []*corev1.PersistentVolumeClaim{cloneOf(claim("c1", ""), "other")}},
		{name: "a pending clone in another namespace without a grant", clones: []*corev1.PersistentVolumeClaim{fromNamespace("tenant", cloneOf(claim("c1", ""), "src"))},
			grants: []*unstructured.Unstructured{grantTo("someone-else")}},
		{name: "a pending clone in another namespace with a grant", clones: []*corev1.PersistentVolumeClaim{fromNamespace("tenant", cloneOf(claim("c1", ""), "src"))},
			grants: []*unstructured.Unstructured{grantTo("tenant")}, wantKept: true},
		{name: "a granted clone in another namespace with the feature off", clones: []*corev1.PersistentVolumeClaim{fromNamespace("tenant", cloneOf(claim("c1", ""), "src"))},
			grants: []*unstructured.Unstructured{grantTo("tenant")}, disabled: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset(claim("src", "pv-src", "kubernetes.io/pvc-protection", provisioner.CloningProtectionFinalizer))
			factory := informers.NewSharedInformerFactory(client, 0)
			var objects []runtime.Object
			for _, g := range tc.grants {
				objects = append(objects, g)
			}
			dynamic := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{referenceGrants: "ReferenceGrantList"}, objects...)
			access := provisioner.CrossNamespaceAccess{Enabled: !tc.disabled, Dynamic: dynamic}
			c, err := New(client, factory.Core().V1().PersistentVolumeClaims(), access, 1)
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

var referenceGrants = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1beta1", Resource: "referencegrants"}
