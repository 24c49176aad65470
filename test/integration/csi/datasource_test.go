// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

func cloneOf(source string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	}
}

// TestClone: a claim cloned from a bound claim of the same class gets a
// volume filled from the source volume; every misuse is a Warning event.
func TestClone(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	class := e.createClass(nil)
	other := e.createClass(nil)
	unserved := e.createClass(nil, func(c *storagev1.StorageClass) { c.Provisioner = "nobody.test.kubeprov.io" })
	source, sourcePV := e.bound(e.createClaim(class.Name, "1Gi"))
	pending := e.createClaim(unserved.Name, "1Gi")

	t.Run("clone", func(t *testing.T) {
		e := e.on(t)
		_, pv := e.bound(e.createClaim(class.Name, "2Gi", cloneOf(source.Name)))
		got := e.driver.LastCreateRequest(pv.Name).GetVolumeContentSource().GetVolume().GetVolumeId()
		if got != sourcePV.Spec.CSI.VolumeHandle {
			t.Errorf("content source %q, want the source's volume handle %q", got, sourcePV.Spec.CSI.VolumeHandle)
		}
		if v, _ := e.driver.Volume(pv.Name); v.SourceVolumeID != sourcePV.Spec.CSI.VolumeHandle {
			t.Errorf("the driver's volume was not cloned: %+v", v)
		}
	})
	rejected := []struct {
		name  string
		claim func(e *env) *corev1.PersistentVolumeClaim
		want  []string
	}{
		{"smaller than the source", func(e *env) *corev1.PersistentVolumeClaim {
			return e.createClaim(class.Name, "512Mi", cloneOf(source.Name))
		},
			[]string{"the clone requests 512Mi, less than its source claim " + e.ns + "/" + source.Name, "request at least 1Gi"}},
		{"other class", func(e *env) *corev1.PersistentVolumeClaim {
			return e.createClaim(other.Name, "1Gi", cloneOf(source.Name))
		},
			[]string{"has StorageClass \"" + class.Name + "\" but the clone has \"" + other.Name + "\""}},
		{"source not bound", func(e *env) *corev1.PersistentVolumeClaim {
			return e.createClaim(class.Name, "1Gi", cloneOf(pending.Name))
		},
			[]string{"source claim " + e.ns + "/" + pending.Name + " of the clone is not bound yet"}},
		{"source missing", func(e *env) *corev1.PersistentVolumeClaim { return e.createClaim(class.Name, "1Gi", cloneOf("absent")) },
			[]string{"source claim " + e.ns + "/absent of the clone does not exist"}},
		{"other volume mode", func(e *env) *corev1.PersistentVolumeClaim {
			return e.createClaim(class.Name, "1Gi", cloneOf(source.Name), func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
			})
		}, []string{"has volumeMode Filesystem but the clone has Block"}},
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			e := e.on(t)
			claim := tc.claim(e)
			e.event(claim, "ProvisioningFailed", tc.want...)
			if n := len(requestsFor(e.driver, pvName(claim))); n != 0 {
				t.Errorf("%d CreateVolume calls for a rejected clone", n)
			}
		})
	}
}

// TestCloneUnsupported: a driver without CLONE_VOLUME is never asked to clone.
func TestCloneUnsupported(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	}})
	class := e.createClass(nil)
	source, _ := e.bound(e.createClaim(class.Name, "1Gi"))
	claim := e.createClaim(class.Name, "1Gi", cloneOf(source.Name))
	e.event(claim, "ProvisioningFailed", "CSI driver "+e.name+" cannot clone volumes (no CLONE_VOLUME capability)")
}

var (
	crdResource      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	snapshotResource = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	contentResource  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

// installSnapshotCRDs installs the VolumeSnapshot API from testdata and
// removes it when the test ends.
func (e *env) installSnapshotCRDs(dyn dynamic.Interface) {
	e.t.Helper()
	e.installCRDs(dyn, "snapshot-crds.yaml", snapshotResource, contentResource)
}

// installCRDs creates the CRDs of testdata/csi/<file> for the test and
// waits until the resources are served.
func (e *env) installCRDs(dyn dynamic.Interface, file string, served ...schema.GroupVersionResource) {
	t, ctx := e.t, e.ctx
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "csi", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := obj.GetName()
		t.Cleanup(func() { _ = dyn.Resource(crdResource).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	e.eventually("the API of "+file+" to be served", func() bool {
		for _, r := range served {
			if _, err := dyn.Resource(r).List(ctx, metav1.ListOptions{}); err != nil {
				return false
			}
		}
		return true
	})
}

// createSnapshot creates a VolumeSnapshot bound to its VolumeSnapshotContent
// with the status the snapshot controller would write.
func (e *env) createSnapshot(dyn dynamic.Interface, name, handle string, ready bool) {
	e.t.Helper()
	e.createSnapshotOf(dyn, e.name, name, handle, ready)
}

// createSnapshotOf is createSnapshot with a VolumeSnapshotContent of the
// CSI driver named driver.
func (e *env) createSnapshotOf(dyn dynamic.Interface, driver, name, handle string, ready bool) {
	e.t.Helper()
	contentName := "content-" + uniqueName(name)
	content := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": contentName},
		"spec": map[string]any{
			"driver": driver, "deletionPolicy": "Delete",
			"source":            map[string]any{"snapshotHandle": handle},
			"volumeSnapshotRef": map[string]any{"name": name, "namespace": e.ns},
		},
	}}
	snap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec":     map[string]any{"source": map[string]any{"volumeSnapshotContentName": contentName}},
	}}
	created, err := dyn.Resource(contentResource).Create(e.ctx, content, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = dyn.Resource(contentResource).Delete(context.Background(), contentName, metav1.DeleteOptions{})
	})
	created.Object["status"] = map[string]any{"snapshotHandle": handle, "readyToUse": ready, "restoreSize": int64(1 << 30)}
	if _, err := dyn.Resource(contentResource).UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	created, err = dyn.Resource(snapshotResource).Namespace(e.ns).Create(e.ctx, snap, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	created.Object["status"] = map[string]any{"readyToUse": ready, "boundVolumeSnapshotContentName": contentName, "restoreSize": "1Gi"}
	if _, err := dyn.Resource(snapshotResource).Namespace(e.ns).UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func restoreFrom(snapshot string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: snapshot}
	}
}

// TestSnapshotRestore: without the snapshot API a restore is a clear Warning
// event; with it, the volume is created from the snapshot's handle.
func TestSnapshotRestore(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{})
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	class := e.createClass(nil)
	waiting := e.createClaim(class.Name, "1Gi", restoreFrom("snap"))
	e.event(waiting, "ProvisioningFailed", "VolumeSnapshot "+e.ns+"/snap", "the VolumeSnapshot API (snapshot.storage.k8s.io/v1) is not installed in this cluster")

	e.installSnapshotCRDs(dyn)
	if err := e.inProcess.AddSnapshot("snap-handle-1", 1<<30); err != nil {
		t.Fatal(err)
	}
	e.createSnapshot(dyn, "snap", "snap-handle-1", true)
	e.createSnapshot(dyn, "unready", "snap-handle-2", false)

	// The claim that waited for the API is provisioned on a retry.
	_, pv := e.bound(waiting)
	if got := e.driver.LastCreateRequest(pv.Name).GetVolumeContentSource().GetSnapshot().GetSnapshotId(); got != "snap-handle-1" {
		t.Errorf("content source snapshot %q, want snap-handle-1", got)
	}
	if v, _ := e.driver.Volume(pv.Name); v.SourceSnapshotID != "snap-handle-1" {
		t.Errorf("the driver's volume was not restored: %+v", v)
	}

	claim := e.createClaim(class.Name, "1Gi", restoreFrom("unready"))
	e.event(claim, "ProvisioningFailed", "VolumeSnapshot "+e.ns+"/unready is not ready to use yet")
	claim = e.createClaim(class.Name, "512Mi", restoreFrom("snap"))
	e.event(claim, "ProvisioningFailed", "the claim requests 512Mi, less than the restore size")
}

// TestCloneProtection: while a clone is being made its source claim carries
// the cloning-protection finalizer, so deleting the source waits; once the
// clone is bound the finalizer goes and so does the source.
func TestCloneProtection(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{})
	class := e.createClass(nil)
	source, _ := e.bound(e.createClaim(class.Name, "1Gi"))
	started, release := make(chan struct{}), make(chan struct{})
	e.inProcess.FailCreate(csidriver.Fault{Started: started, Release: release})
	clone := e.createClaim(class.Name, "1Gi", cloneOf(source.Name))
	select {
	case <-started:
	case <-e.ctx.Done():
		t.Fatal("CreateVolume of the clone never came")
	}

	claims := cp.Client.CoreV1().PersistentVolumeClaims(e.ns)
	got, err := claims.Get(e.ctx, source.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Finalizers, cloningProtection) {
		t.Fatalf("source finalizers %v during the clone, want %s", got.Finalizers, cloningProtection)
	}
	if err := claims.Delete(e.ctx, source.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the source to wait, Terminating, for the clone", func() bool {
		got, err := claims.Get(e.ctx, source.Name, metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil && slices.Equal(got.Finalizers, []string{cloningProtection})
	})

	close(release)
	e.bound(clone)
	if err := framework.WaitForPVCDeleted(e.ctx, cp.Client, e.ns, source.Name); err != nil {
		t.Fatalf("the source stays after its clone is bound: %v", err)
	}
}

// cloningProtection is the finalizer on a clone's source, upstream's name.
const cloningProtection = "provisioner.storage.kubernetes.io/cloning-protection"

// TestCrossNamespaceClone: with --feature-gates=CrossNamespaceVolumeDataSource=true
// a claim clones a claim of another namespace once a ReferenceGrant there
// allows it; until then a Warning event says what is missing. Without the
// gate such a claim is refused.
func TestCrossNamespaceClone(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{}, "--feature-gates=CrossNamespaceVolumeDataSource=true")
	dyn := e.installReferenceGrants()
	class := e.createClass(nil)
	source, sourcePV := e.bound(e.createClaim(class.Name, "1Gi"))
	other := e.inNewNamespace("csi-clone-to")
	clone := other.createClaim(class.Name, "1Gi", cloneAcrossNamespaces(source))
	e.event(clone, "ProvisioningFailed", "no ReferenceGrant in namespace "+e.ns+" lets claims of namespace "+other.ns)

	e.grantClaimsOf(dyn, other.ns, source.Name)
	_, pv := other.bound(clone)
	if got := e.driver.LastCreateRequest(pv.Name).GetVolumeContentSource().GetVolume().GetVolumeId(); got != sourcePV.Spec.CSI.VolumeHandle {
		t.Errorf("content source %q, want the source's volume %q", got, sourcePV.Spec.CSI.VolumeHandle)
	}
}

// TestCloneProtectionAcrossNamespaces: a claim of another namespace that
// names a claim as its source without a ReferenceGrant can never be cloned,
// so it does not keep that claim's cloning-protection finalizer: deleting
// the claim, after a real clone of it made the provisioner put the
// finalizer on, deletes it. A clone the source's owner granted still holds
// it until that clone is bound.
func TestCloneProtectionAcrossNamespaces(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{}, "--feature-gates=CrossNamespaceVolumeDataSource=true")
	dyn := e.installReferenceGrants()
	class := e.createClass(nil)
	claims := cp.Client.CoreV1().PersistentVolumeClaims(e.ns)

	t.Run("without a grant", func(t *testing.T) {
		e := e.on(t)
		victim, _ := e.bound(e.createClaim(class.Name, "1Gi"))
		tenant := e.inNewNamespace("csi-clone-squatter")
		squatter := tenant.createClaim(class.Name, "1Gi", cloneAcrossNamespaces(victim))
		e.event(squatter, "ProvisioningFailed", "no ReferenceGrant in namespace "+e.ns+" lets claims of namespace "+tenant.ns)
		// The victim's own clone puts the finalizer on; once it is bound
		// nothing permitted is pending.
		e.bound(e.createClaim(class.Name, "1Gi", cloneOf(victim.Name)))
		if err := claims.Delete(e.ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The protection reacts within milliseconds: 30 s is ample, and
		// leaves the test's time for the next case.
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		if err := framework.WaitForPVCDeleted(ctx, cp.Client, e.ns, victim.Name); err != nil {
			got, getErr := claims.Get(e.ctx, victim.Name, metav1.GetOptions{})
			t.Fatalf("a claim of namespace %s without a ReferenceGrant keeps the victim's claim Terminating (finalizers %v, %v): %v", tenant.ns, got.Finalizers, getErr, err)
		}
	})

	t.Run("with a grant", func(t *testing.T) {
		e := e.on(t)
		source, _ := e.bound(e.createClaim(class.Name, "1Gi"))
		team := e.inNewNamespace("csi-clone-granted")
		e.grantClaimsOf(dyn, team.ns, source.Name)
		started, release := make(chan struct{}), make(chan struct{})
		e.inProcess.FailCreate(csidriver.Fault{Started: started, Release: release})
		clone := team.createClaim(class.Name, "1Gi", cloneAcrossNamespaces(source))
		select {
		case <-started:
		case <-e.ctx.Done():
			t.Fatal("CreateVolume of the clone never came")
		}
		if err := claims.Delete(e.ctx, source.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// A change of the clone makes the cloning protection look again.
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		if _, err := cp.Client.CoreV1().PersistentVolumeClaims(team.ns).Patch(e.ctx, clone.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The protection reacts within milliseconds; a few seconds of the
		// source staying, Terminating, show it waits for the clone.
		held := func() bool {
			got, err := claims.Get(e.ctx, source.Name, metav1.GetOptions{})
			return err == nil && got.DeletionTimestamp != nil && slices.Equal(got.Finalizers, []string{cloningProtection})
		}
		e.eventually("the source to be Terminating", held)
		for range 30 {
			if !held() {
				t.Fatal("the source of a granted clone in progress lost its cloning protection")
			}
			time.Sleep(100 * time.Millisecond)
		}
		close(release)
		team.bound(clone)
		if err := framework.WaitForPVCDeleted(e.ctx, cp.Client, e.ns, source.Name); err != nil {
			t.Fatalf("the source stays after its clone is bound: %v", err)
		}
	})
}

var referenceGrantResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1beta1", Resource: "referencegrants"}

// installReferenceGrants installs the ReferenceGrant API for the test and
// returns a client to write grants with.
func (e *env) installReferenceGrants() dynamic.Interface {
	e.t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	e.installCRDs(dyn, "referencegrant-crd.yaml", referenceGrantResource)
	return dyn
}

// grantClaimsOf creates, in e's namespace, the ReferenceGrant its owner
// would write to let claims of namespace from use claim source.
func (e *env) grantClaimsOf(dyn dynamic.Interface, from, source string) {
	e.t.Helper()
	grant := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
		"metadata": map[string]any{"name": "clones-from-" + from, "namespace": e.ns},
		"spec": map[string]any{
			"from": []any{map[string]any{"group": "", "kind": "PersistentVolumeClaim", "namespace": from}},
			"to":   []any{map[string]any{"group": "", "kind": "PersistentVolumeClaim", "name": source}},
		},
	}}
	if _, err := dyn.Resource(referenceGrantResource).Namespace(e.ns).Create(e.ctx, grant, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// inNewNamespace is e in a new namespace of its own (prefix), with the
// same driver and provisioner.
func (e *env) inNewNamespace(prefix string) *env {
	other := *e
	other.ns = cp.CreateTestNamespace(e.t, prefix)
	return &other
}

// cloneAcrossNamespaces makes a claim a clone of source, named with its
// namespace.
func cloneAcrossNamespaces(source *corev1.PersistentVolumeClaim) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source.Name, Namespace: ptr.To(source.Namespace)}
	}
}
