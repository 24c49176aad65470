// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
)

// The VolumeSnapshot API, installed with the external-snapshotter CRDs.
const snapshotGroup = "snapshot.storage.k8s.io"

// AnnAllowVolumeModeChange on a VolumeSnapshotContent, set to "true" by an
// administrator, allows restoring its snapshot into a volume of another
// volumeMode than the snapshot's source (see PreventVolumeModeConversion).
const AnnAllowVolumeModeChange = "snapshot.storage.kubernetes.io/allow-volume-mode-change"

var (
	snapshotGroupVersion = schema.GroupVersion{Group: snapshotGroup, Version: "v1"}
	snapshotResource     = snapshotGroupVersion.WithResource("volumesnapshots")
	contentResource      = snapshotGroupVersion.WithResource("volumesnapshotcontents")
)

// dataSource is a claim's data source, from dataSourceRef or dataSource.
type dataSource struct {
	kind, apiGroup, name, namespace string
}

func (d *dataSource) isClaim() bool { return d.kind == "PersistentVolumeClaim" && d.apiGroup == "" }
func (d *dataSource) isSnapshot() bool {
	return d.kind == "VolumeSnapshot" && d.apiGroup == snapshotGroup
}

// claimDataSource returns the claim's data source, nil if it has none.
func claimDataSource(claim *corev1.PersistentVolumeClaim) *dataSource {
	if ref := claim.Spec.DataSourceRef; ref != nil {
		d := &dataSource{kind: ref.Kind, name: ref.Name, namespace: claim.Namespace}
		if ref.APIGroup != nil {
			d.apiGroup = *ref.APIGroup
		}
		if ref.Namespace != nil && *ref.Namespace != "" {
			d.namespace = *ref.Namespace
		}
		return d
	}
	if ref := claim.Spec.DataSource; ref != nil {
		d := &dataSource{kind: ref.Kind, name: ref.Name, namespace: claim.Namespace}
		if ref.APIGroup != nil {
			d.apiGroup = *ref.APIGroup
		}
		return d
	}
	return nil
}

// CloneSource returns the claim a claim is cloned from; ok is false for a
// claim that is not a clone.
func CloneSource(claim *corev1.PersistentVolumeClaim) (source cache.ObjectName, ok bool) {
	d := claimDataSource(claim)
	if d == nil || !d.isClaim() {
		return cache.ObjectName{}, false
	}
	return cache.ObjectName{Namespace: d.namespace, Name: d.name}, true
}

// checkDataSourceKind leaves claims with a data source this provisioner does
// not know to their volume populator, quietly.
func checkDataSourceKind(claim *corev1.PersistentVolumeClaim) error {
	d := claimDataSource(claim)
	if d == nil || d.isClaim() || d.isSnapshot() {
		return nil
	}
	return controller.Ignore("data source %s %s (group %q) is for a volume populator", d.kind, d.name, d.apiGroup)
}

// contentSource returns what the new volume is filled from, nil for an
// empty volume, and for a restore the VolumeSnapshot to protect while
// CreateVolume restores from it.
func (p *Provisioner) contentSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, className string) (*csi.VolumeContentSource, *sourceSnapshot, error) {
	d := claimDataSource(claim)
	if d == nil {
		return nil, nil, nil
	}
	if err := p.crossNamespaceAccess().Check(ctx, claim); err != nil {
		return nil, nil, err
	}
	switch {
	case d.isClaim():
		source, err := p.cloneSource(ctx, claim, className, d.namespace, d.name)
		return source, nil, err
	case d.isSnapshot():
		return p.snapshotSource(ctx, claim, d.namespace, d.name)
	}
	return nil, nil, checkDataSourceKind(claim)
}

// cloneSource checks that a claim can be cloned from the claim source and
// returns the source volume.
func (p *Provisioner) cloneSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, className, namespace, source string) (*csi.VolumeContentSource, error) {
	what := fmt.Sprintf("source claim %s/%s of the clone", namespace, source)
	if !p.cfg.Capabilities.CloneVolume {
		return nil, fmt.Errorf("CSI driver %s cannot clone volumes (no CLONE_VOLUME capability): remove the claim's data source or use a StorageClass of another driver",
			p.cfg.DriverName)
	}
	src, err := p.cfg.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, source, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s does not exist: create it or fix the claim's data source", what)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	switch {
	case src.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%s is being deleted", what)
	case src.Status.Phase != corev1.ClaimBound || src.Spec.VolumeName == "":
		return nil, fmt.Errorf("%s is not bound yet (phase %q): the clone is made once it is", what, src.Status.Phase)
	case controller.ClaimClass(src) != className:
		return nil, fmt.Errorf("%s has StorageClass %q but the clone has %q: a clone must use its source's StorageClass", what, controller.ClaimClass(src), className)
	case volumeMode(src) != volumeMode(claim):
		return nil, fmt.Errorf("%s has volumeMode %s but the clone has %s: they must be the same", what, volumeMode(src), volumeMode(claim))
	}
	srcSize := src.Spec.Resources.Requests[corev1.ResourceStorage]
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.Cmp(srcSize) < 0 {
		return nil, fmt.Errorf("the clone requests %s, less than its %s requests (%s): request at least %s", size.String(), what, srcSize.String(), srcSize.String())
	}
	pv, err := p.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading volume %s of %s: %w", src.Spec.VolumeName, what, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.cfg.DriverName {
		return nil, fmt.Errorf("volume %s of %s is not a volume of CSI driver %s: only its own volumes can be cloned", pv.Name, what, p.cfg.DriverName)
	}
	if err := p.protectCloneSource(ctx, src); err != nil {
		return nil, fmt.Errorf("protecting %s: %w", what, err)
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle},
	}}, nil
}

// CloningProtectionFinalizer keeps a clone's source claim, and so its
// volume, while the clone is being made; package cloneprotection removes it
// once no clone of the claim is pending. The upstream sidecar's name.
const CloningProtectionFinalizer = "provisioner.storage.kubernetes.io/cloning-protection"

// protectCloneSource puts CloningProtectionFinalizer on src before the
// driver is asked to copy its volume.
func (p *Provisioner) protectCloneSource(ctx context.Context, src *corev1.PersistentVolumeClaim) error {
	if slices.Contains(src.Finalizers, CloningProtectionFinalizer) {
		return nil
	}
	updated := src.DeepCopy()
	updated.Finalizers = append(updated.Finalizers, CloningProtectionFinalizer)
	_, err := p.cfg.Client.CoreV1().PersistentVolumeClaims(src.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// snapshotSource checks that a claim can be restored from a VolumeSnapshot
// and returns the snapshot, as the driver knows it and as an object.
func (p *Provisioner) snapshotSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, namespace, name string) (*csi.VolumeContentSource, *sourceSnapshot, error) {
	what := fmt.Sprintf("VolumeSnapshot %s/%s", namespace, name)
	snap, err := p.restorableSnapshot(ctx, namespace, name, what)
	if err != nil {
		return nil, nil, err
	}
	contentName, err := checkSnapshotStatus(snap, claim, what)
	if err != nil {
		return nil, nil, err
	}
	handle, err := p.snapshotHandle(ctx, snap, claim, contentName, what)
	if err != nil {
		return nil, nil, err
	}
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: handle},
	}}, &sourceSnapshot{namespace: snap.GetNamespace(), name: snap.GetName(), uid: snap.GetUID()}, nil
}

// restorableSnapshot reads the VolumeSnapshot what, which must exist and
// not be being deleted unless a restore from it already began.
func (p *Provisioner) restorableSnapshot(ctx context.Context, namespace, name, what string) (*unstructured.Unstructured, error) {
	if !p.snapshotAPIInstalled(ctx) {
		return nil, fmt.Errorf("the claim's data source is %s, but the VolumeSnapshot API (%s) is not installed in this cluster: "+
			"install the snapshot CRDs and snapshot controller, or remove the data source", what, snapshotGroupVersion.String())
	}
	snap, err := p.cfg.Dynamic.Resource(snapshotResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s does not exist: create it or fix the claim's data source", what)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if snap.GetDeletionTimestamp() != nil {
		// A restore that began before the deletion holds it with the
		// protection finalizer: it goes on, so that the volume the driver
		// may be making from it is finished (and deleted if its claim is
		// gone), as upstream. A new restore may not begin.
		if !slices.Contains(snap.GetFinalizers(), SnapshotProtectionFinalizer) {
			return nil, fmt.Errorf("%s is being deleted", what)
		}
		klog.FromContext(ctx).V(2).Info("VolumeSnapshot is being deleted, but a restore from it is in progress: going on", "snapshot", what)
	}
	return snap, nil
}

// checkSnapshotStatus checks that the snapshot is ready and fits in the
// claim, and returns the name of its VolumeSnapshotContent.
func checkSnapshotStatus(snap *unstructured.Unstructured, claim *corev1.PersistentVolumeClaim, what string) (string, error) {
	ready, _, _ := unstructured.NestedBool(snap.Object, "status", "readyToUse")
	contentName, _, _ := unstructured.NestedString(snap.Object, "status", "boundVolumeSnapshotContentName")
	if !ready || contentName == "" {
		return "", fmt.Errorf("%s is not ready to use yet: the volume is made once it is", what)
	}
	if restore, ok, err := nestedQuantity(snap, "status", "restoreSize"); err != nil {
		return "", fmt.Errorf("%s: status.restoreSize: %w", what, err)
	} else if size := claim.Spec.Resources.Requests[corev1.ResourceStorage]; ok && size.Cmp(restore) < 0 {
		return "", fmt.Errorf("the claim requests %s, less than the restore size of %s (%s): request at least %s", size.String(), what, restore.String(), restore.String())
	}
	return contentName, nil
}

// snapshotHandle reads the snapshot's VolumeSnapshotContent contentName and
// returns the driver's handle of the snapshot, once the content is checked
// to be the snapshot's, the driver's, and of the claim's volumeMode.
func (p *Provisioner) snapshotHandle(ctx context.Context, snap *unstructured.Unstructured, claim *corev1.PersistentVolumeClaim, contentName, what string) (string, error) {
	content, err := p.cfg.Dynamic.Resource(contentResource).Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading VolumeSnapshotContent %s of %s: %w", contentName, what, err)
	}
	driver, ref := contentOf(content)
	handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
	switch {
	case ref != objectName(snap):
		// Only a content bound back to this snapshot may be used: otherwise
		// a user could restore someone else's snapshot by naming its content.
		return "", fmt.Errorf("VolumeSnapshotContent %s does not belong to %s (it refers to %s)", contentName, what, ref)
	case driver != p.cfg.DriverName:
		return "", fmt.Errorf("%s was taken by CSI driver %q, not %s: restore it with a StorageClass of that driver", what, driver, p.cfg.DriverName)
	case handle == "":
		return "", fmt.Errorf("%s is not ready to use yet: its VolumeSnapshotContent %s has no snapshot handle", what, contentName)
	}
	if p.cfg.PreventVolumeModeConversion {
		// A content made before the snapshotter recorded the mode has none:
		// nothing to compare, as upstream.
		sourceMode, _, _ := unstructured.NestedString(content.Object, "spec", "sourceVolumeMode")
		if sourceMode != "" && corev1.PersistentVolumeMode(sourceMode) != volumeMode(claim) && content.GetAnnotations()[AnnAllowVolumeModeChange] != "true" {
			return "", fmt.Errorf("%s was taken of a volume with volumeMode %s, but the claim asks for %s: "+
				"use volumeMode %s, or have an administrator annotate VolumeSnapshotContent %s with %s: \"true\"",
				what, sourceMode, volumeMode(claim), sourceMode, contentName, AnnAllowVolumeModeChange)
		}
	}
	return handle, nil
}

// snapshotAPIInstalled asks discovery whether the VolumeSnapshot API is served.
func (p *Provisioner) snapshotAPIInstalled(ctx context.Context) bool {
	if p.cfg.Dynamic == nil {
		return false
	}
	resources, err := p.cfg.Client.Discovery().ServerResourcesForGroupVersion(snapshotGroupVersion.String())
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Discovering the VolumeSnapshot API")
		}
		return false
	}
	for _, r := range resources.APIResources {
		if r.Name == snapshotResource.Resource {
			return true
		}
	}
	return false
}

// nestedQuantity reads a quantity field, which JSON holds as a string or a number.
func nestedQuantity(obj *unstructured.Unstructured, fields ...string) (resource.Quantity, bool, error) {
	v, ok, err := unstructured.NestedFieldNoCopy(obj.Object, fields...)
	if !ok || err != nil || v == nil {
		return resource.Quantity{}, false, err
	}
	q, err := resource.ParseQuantity(fmt.Sprint(v))
	return q, err == nil, err
}

func volumeMode(claim *corev1.PersistentVolumeClaim) corev1.PersistentVolumeMode {
	if claim.Spec.VolumeMode != nil {
		return *claim.Spec.VolumeMode
	}
	return corev1.PersistentVolumeFilesystem
}
