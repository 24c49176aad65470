// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/gate"
)

// SnapshotProtectionFinalizer keeps a VolumeSnapshot, and so the snapshot
// the driver restores from, while CreateVolume may still be restoring a
// volume from it: a snapshot deleted during a restore that timed out would
// otherwise be gone when the restore is asked again, and the volume the
// driver finishes in the background would be left with no claim to delete
// it for (kubernetes-csi/external-provisioner issue 1449). It is
// upstream's name, so that a snapshot protected by one sidecar is let go by
// the other.
const SnapshotProtectionFinalizer = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"

// sourceSnapshot is the VolumeSnapshot a restore reads, as validated.
type sourceSnapshot struct {
	namespace, name string
	uid             types.UID
}

func (s *sourceSnapshot) String() string { return s.namespace + "/" + s.name }

// protectSnapshot puts SnapshotProtectionFinalizer on the snapshot before
// CreateVolume is asked to restore from it, and counts this call as its
// user until done. done(letGo) ends the use; with letGo (the restore is
// over) it removes the finalizer unless another call uses the snapshot. A
// snapshot deleted meanwhile gets no new finalizer (the API server refuses
// it): the error keeps CreateVolume from being called.
func (p *Provisioner) protectSnapshot(ctx context.Context, snap *sourceSnapshot) (done func(ctx context.Context, letGo bool) error, err error) {
	p.snapshotMu.Lock()
	defer p.snapshotMu.Unlock()
	// Read again under the lock: the sweep may have let go of it since the
	// snapshot was validated.
	obj, err := p.cfg.Dynamic.Resource(snapshotResource).Namespace(snap.namespace).Get(ctx, snap.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("protecting VolumeSnapshot %s: %w", snap, err)
	}
	if obj.GetUID() != snap.uid {
		return nil, fmt.Errorf("VolumeSnapshot %s was replaced while the restore was prepared; will look again", snap)
	}
	if !slices.Contains(obj.GetFinalizers(), SnapshotProtectionFinalizer) {
		if obj.GetDeletionTimestamp() != nil {
			return nil, fmt.Errorf("VolumeSnapshot %s is being deleted", snap)
		}
		err := p.patchSnapshotFinalizers(ctx, obj, append(obj.GetFinalizers(), SnapshotProtectionFinalizer))
		if apierrors.IsForbidden(err) {
			// As upstream: RBAC written before the protection (no patch on
			// volumesnapshots) restores unprotected rather than not at all.
			klog.FromContext(ctx).Error(err, "Restoring without protecting the VolumeSnapshot: give the provisioner patch on volumesnapshots",
				"snapshot", snap.String())
			return func(context.Context, bool) error { return nil }, nil
		}
		if err != nil {
			return nil, fmt.Errorf("protecting VolumeSnapshot %s with finalizer %s: %w", snap, SnapshotProtectionFinalizer, err)
		}
		klog.FromContext(ctx).V(2).Info("Protecting the VolumeSnapshot while the volume is restored", "snapshot", snap.String())
	}
	if p.snapshotUsers == nil {
		p.snapshotUsers = map[string]int{}
	}
	p.snapshotUsers[snap.String()]++
	return func(ctx context.Context, letGo bool) error {
		p.snapshotMu.Lock()
		defer p.snapshotMu.Unlock()
		key := snap.String()
		if p.snapshotUsers[key]--; p.snapshotUsers[key] > 0 {
			return nil // another restore from it is under way
		}
		delete(p.snapshotUsers, key)
		if !letGo {
			return nil
		}
		return p.releaseSnapshot(ctx, snap.namespace, snap.name)
	}, nil
}

// releaseSnapshot removes SnapshotProtectionFinalizer from a snapshot; the
// caller holds snapshotMu.
func (p *Provisioner) releaseSnapshot(ctx context.Context, namespace, name string) error {
	key := namespace + "/" + name
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := p.cfg.Dynamic.Resource(snapshotResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		finalizers := obj.GetFinalizers()
		if !slices.Contains(finalizers, SnapshotProtectionFinalizer) {
			return nil
		}
		return p.patchSnapshotFinalizers(ctx, obj, slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == SnapshotProtectionFinalizer }))
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing finalizer %s from VolumeSnapshot %s: %w", SnapshotProtectionFinalizer, key, err)
	}
	klog.FromContext(ctx).V(2).Info("VolumeSnapshot let go: no restore from it in progress", "snapshot", key)
	return nil
}

// patchSnapshotFinalizers sets the finalizers of the snapshot as read: the
// resourceVersion makes it a compare-and-swap, so that nobody else's
// finalizer is lost.
func (p *Provisioner) patchSnapshotFinalizers(ctx context.Context, obj *unstructured.Unstructured, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	_, err = p.cfg.Dynamic.Resource(snapshotResource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// SweepSnapshotProtection removes SnapshotProtectionFinalizer from every
// VolumeSnapshot no restore needs any more: one that no Provision call is
// using and no operation in flight restores from. inFlight returns the
// claims of the operations in flight (controller.InFlightClaims), those
// resumed after a restart included; it is asked again before each removal.
// A finalizer is left this way when the provisioner stopped between a
// restore's end and letting go of its snapshot, or by another sidecar.
func (p *Provisioner) SweepSnapshotProtection(ctx context.Context, inFlight func() []*corev1.PersistentVolumeClaim) error {
	if !p.snapshotAPIInstalled(ctx) {
		return nil
	}
	var errs []error
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := p.cfg.Dynamic.Resource(snapshotResource).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing VolumeSnapshots: %w", err)
		}
		for i := range list.Items {
			if err := p.sweepSnapshot(ctx, &list.Items[i], inFlight); err != nil {
				errs = append(errs, err)
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return errors.Join(errs...)
		}
	}
}

// sweepSnapshot removes SnapshotProtectionFinalizer from one snapshot of
// this driver if it has it and no restore needs it.
func (p *Provisioner) sweepSnapshot(ctx context.Context, snap *unstructured.Unstructured, inFlight func() []*corev1.PersistentVolumeClaim) error {
	if !slices.Contains(snap.GetFinalizers(), SnapshotProtectionFinalizer) {
		return nil
	}
	key := objectName(snap)
	if restoresFrom(inFlight(), key) {
		return nil
	}
	ours, err := p.ourDriversSnapshot(ctx, snap)
	if !ours {
		return err
	}
	return p.releaseOrphan(ctx, key)
}

// ourDriversSnapshot asks lib's gate.SweepFinalizer whether the protection
// finalizer, which has upstream's name, may be swept from snap: only from
// a snapshot of this driver, since another driver's sidecar may be
// restoring from its own snapshot right now. What the gate is given comes
// from the VolumeSnapshotContent the snapshot's status names (its
// spec.volumeSnapshotRef and spec.driver), which tenants cannot edit; a
// snapshot without a content (not bound, or its content gone) is not known
// to be ours.
func (p *Provisioner) ourDriversSnapshot(ctx context.Context, snap *unstructured.Unstructured) (bool, error) {
	var driver string
	var ref cache.ObjectName
	if name, _, _ := unstructured.NestedString(snap.Object, "status", "boundVolumeSnapshotContentName"); name != "" {
		content, err := p.cfg.Dynamic.Resource(contentResource).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			driver, ref = contentOf(content)
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("reading VolumeSnapshotContent %s of VolumeSnapshot %s/%s: %w", name, snap.GetNamespace(), snap.GetName(), err)
		}
	}
	boundTo := ""
	if ref.Name != "" {
		boundTo = ref.String()
	}
	return gate.SweepFinalizer(objectName(snap).String(), boundTo, driver, p.cfg.DriverName) == nil, nil
}

// contentOf is the driver of a VolumeSnapshotContent and the snapshot it
// refers to: it is that snapshot's only.
func contentOf(content *unstructured.Unstructured) (driver string, snapshot cache.ObjectName) {
	driver, _, _ = unstructured.NestedString(content.Object, "spec", "driver")
	snapshot.Name, _, _ = unstructured.NestedString(content.Object, "spec", "volumeSnapshotRef", "name")
	snapshot.Namespace, _, _ = unstructured.NestedString(content.Object, "spec", "volumeSnapshotRef", "namespace")
	return driver, snapshot
}

func objectName(obj *unstructured.Unstructured) cache.ObjectName {
	return cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// releaseOrphan lets go of a snapshot unless a Provision call uses it.
func (p *Provisioner) releaseOrphan(ctx context.Context, key cache.ObjectName) error {
	p.snapshotMu.Lock()
	defer p.snapshotMu.Unlock()
	if p.snapshotUsers[key.String()] > 0 {
		return nil
	}
	klog.FromContext(ctx).Info("Removing the protection finalizer of a VolumeSnapshot no restore needs", "snapshot", key.String())
	return p.releaseSnapshot(ctx, key.Namespace, key.Name)
}

// restoresFrom reports whether one of the claims restores from the snapshot.
func restoresFrom(claims []*corev1.PersistentVolumeClaim, snapshot cache.ObjectName) bool {
	return slices.ContainsFunc(claims, func(claim *corev1.PersistentVolumeClaim) bool {
		if claim == nil {
			return false
		}
		d := claimDataSource(claim)
		return d != nil && d.isSnapshot() && d.namespace == snapshot.Namespace && d.name == snapshot.Name
	})
}

// RunSnapshotProtectionSweep sweeps at once and then every interval until
// ctx ends; meant for the active instance (controller.WithActiveTask),
// whose context gives the operations in flight.
func (p *Provisioner) RunSnapshotProtectionSweep(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := p.SweepSnapshotProtection(ctx, func() []*corev1.PersistentVolumeClaim { return controller.InFlightClaims(ctx) }); err != nil {
			klog.FromContext(ctx).Error(err, "Sweeping VolumeSnapshot protection finalizers; will try again")
		}
	}, interval)
}
