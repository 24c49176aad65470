// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/lib/controller"
)

func sourceClaim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := newClaim(func(c *corev1.PersistentVolumeClaim) {
		c.Name, c.UID = "source", "uid-src"
		c.Spec.VolumeName = "pv-src"
		c.Status.Phase = corev1.ClaimBound
	})
	for _, m := range mutate {
		m(c)
	}
	return c
}

func sourceVolume(driver string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-src"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "handle-src"},
		}}}
}

func cloneOf(name string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: name}
	}
}

func TestCloneSource(t *testing.T) {
	canClone := Config{Capabilities: connection.Capabilities{CloneVolume: true}}
	tests := []struct {
		name    string
		cfg     Config
		claim   *corev1.PersistentVolumeClaim
		objects []runtime.Object
		wantErr string
	}{
		{name: "clone", cfg: canClone, claim: newClaim(cloneOf("source")), objects: []runtime.Object{sourceClaim(), sourceVolume(testDriver)}},
		{name: "old dataSource field", cfg: canClone, claim: newClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
		}), objects: []runtime.Object{sourceClaim(), sourceVolume(testDriver)}},
		{name: "driver cannot clone", claim: newClaim(cloneOf("source")), objects: []runtime.Object{sourceClaim(), sourceVolume(testDriver)},
			wantErr: "cannot clone volumes (no CLONE_VOLUME capability)"},
		{name: "source missing", cfg: canClone, claim: newClaim(cloneOf("source")),
			wantErr: "source claim team-a/source of the clone does not exist"},
		{name: "source not bound", cfg: canClone, claim: newClaim(cloneOf("source")),
			objects: []runtime.Object{sourceClaim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimPending; c.Spec.VolumeName = "" })},
			wantErr: "is not bound yet"},
		{name: "other class", cfg: canClone, claim: newClaim(cloneOf("source")),
			objects: []runtime.Object{sourceClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("slow") }), sourceVolume(testDriver)},
			wantErr: `has StorageClass "slow" but the clone has "fast"`},
		{name: "bigger source", cfg: canClone, claim: newClaim(cloneOf("source")),
			objects: []runtime.Object{sourceClaim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
			}), sourceVolume(testDriver)},
			wantErr: "the clone requests 1Gi, less than its source claim team-a/source of the clone requests (2Gi)"},
		{name: "other volume mode", cfg: canClone, claim: newClaim(cloneOf("source")),
			objects: []runtime.Object{sourceClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }), sourceVolume(testDriver)},
			wantErr: "has volumeMode Block but the clone has Filesystem"},
		{name: "other driver's volume", cfg: canClone, claim: newClaim(cloneOf("source")),
			objects: []runtime.Object{sourceClaim(), sourceVolume("other.example.com")},
			wantErr: "is not a volume of CSI driver " + testDriver},
		{name: "other namespace", cfg: canClone, claim: newClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "source", Namespace: ptr.To("team-b")}
		}), wantErr: "is in another namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fc := newTestProvisioner(t, tc.cfg, tc.objects...)
			_, state, err := p.Provision(testContext(t), options(tc.claim, nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if state != controller.ProvisioningNoChange || len(fc.creates) != 0 {
					t.Errorf("state %s, %d CreateVolume calls; want NoChange and none", state, len(fc.creates))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fc.creates[0].GetVolumeContentSource().GetVolume().GetVolumeId(); got != "handle-src" {
				t.Errorf("content source volume %q, want handle-src", got)
			}
		})
	}
}

// TestPopulatorDataSourceIgnored: claims for volume populators are left alone, quietly.
func TestPopulatorDataSourceIgnored(t *testing.T) {
	p, fc := newTestProvisioner(t, Config{})
	claim := newClaim(func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("hello.example.com"), Kind: "Hello", Name: "h"}
	})
	_, _, err := p.Provision(testContext(t), options(claim, nil))
	if !controller.IsIgnored(err) || len(fc.creates) != 0 {
		t.Errorf("error %v, %d CreateVolume calls; want ignored and none", err, len(fc.creates))
	}
}

func snapshotObjects(ready bool, driver, refName, restoreSize string) []runtime.Object {
	snap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": "snap", "namespace": "team-a"},
		"status":   map[string]any{"readyToUse": ready, "boundVolumeSnapshotContentName": "content", "restoreSize": restoreSize},
	}}
	content := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": "content"},
		"spec":     map[string]any{"driver": driver, "volumeSnapshotRef": map[string]any{"name": refName, "namespace": "team-a"}},
		"status":   map[string]any{"snapshotHandle": "snap-handle"},
	}}
	return []runtime.Object{snap, content}
}

// sourceMode records volumeMode as the snapshot's source mode on the
// content of objects (snapshotObjects), and its annotations.
func sourceMode(objects []runtime.Object, mode string, annotations map[string]string) []runtime.Object {
	content := objects[1].(*unstructured.Unstructured)
	_ = unstructured.SetNestedField(content.Object, mode, "spec", "sourceVolumeMode")
	content.SetAnnotations(annotations)
	return objects
}

func TestSnapshotSource(t *testing.T) {
	restore := newClaim(func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To(snapshotGroup), Kind: "VolumeSnapshot", Name: "snap"}
	})
	tests := []struct {
		name       string
		noAPI      bool
		objects    []runtime.Object
		mayConvert bool // --prevent-volume-mode-conversion=false
		wantHandle string
		wantErr    string
	}{
		{name: "restore", objects: snapshotObjects(true, testDriver, "snap", "512Mi"), wantHandle: "snap-handle"},
		{name: "API not installed", noAPI: true,
			wantErr: "the claim's data source is VolumeSnapshot team-a/snap, but the VolumeSnapshot API (snapshot.storage.k8s.io/v1) is not installed"},
		{name: "snapshot missing", wantErr: "VolumeSnapshot team-a/snap does not exist"},
		{name: "not ready", objects: snapshotObjects(false, testDriver, "snap", "512Mi"), wantErr: "is not ready to use yet"},
		{name: "other driver", objects: snapshotObjects(true, "other.example.com", "snap", "512Mi"), wantErr: `was taken by CSI driver "other.example.com"`},
		{name: "content of another snapshot", objects: snapshotObjects(true, testDriver, "theirs", "512Mi"), wantErr: "does not belong to VolumeSnapshot team-a/snap"},
		{name: "restore size above the request", objects: snapshotObjects(true, testDriver, "snap", "2Gi"), wantErr: "less than the restore size"},
		{name: "same volume mode", objects: sourceMode(snapshotObjects(true, testDriver, "snap", "512Mi"), "Filesystem", nil), wantHandle: "snap-handle"},
		{name: "volume mode conversion refused", objects: sourceMode(snapshotObjects(true, testDriver, "snap", "512Mi"), "Block", nil),
			wantErr: "VolumeSnapshot team-a/snap was taken of a volume with volumeMode Block, but the claim asks for Filesystem: " +
				`use volumeMode Block, or have an administrator annotate VolumeSnapshotContent content with snapshot.storage.kubernetes.io/allow-volume-mode-change: "true"`},
		{name: "volume mode conversion allowed by the content", wantHandle: "snap-handle",
			objects: sourceMode(snapshotObjects(true, testDriver, "snap", "512Mi"), "Block", map[string]string{AnnAllowVolumeModeChange: "true"})},
		{name: "annotation other than true allows nothing", wantErr: "was taken of a volume with volumeMode Block",
			objects: sourceMode(snapshotObjects(true, testDriver, "snap", "512Mi"), "Block", map[string]string{AnnAllowVolumeModeChange: "yes"})},
		{name: "volume mode conversion not prevented", mayConvert: true, wantHandle: "snap-handle",
			objects: sourceMode(snapshotObjects(true, testDriver, "snap", "512Mi"), "Block", nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fc := newTestProvisioner(t, Config{PreventVolumeModeConversion: !tc.mayConvert})
			if !tc.noAPI {
				p.cfg.Client.(*fake.Clientset).Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
					GroupVersion: snapshotGroupVersion.String(),
					APIResources: []metav1.APIResource{{Name: "volumesnapshots", Namespaced: true, Kind: "VolumeSnapshot"}},
				}}
			}
			scheme := runtime.NewScheme()
			p.cfg.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
				snapshotResource: "VolumeSnapshotList", contentResource: "VolumeSnapshotContentList",
			}, tc.objects...)
			_, _, err := p.Provision(testContext(t), options(restore, nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fc.creates[0].GetVolumeContentSource().GetSnapshot().GetSnapshotId(); got != tc.wantHandle {
				t.Errorf("snapshot id %q, want %q", got, tc.wantHandle)
			}
		})
	}
}
