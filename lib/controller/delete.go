// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/internal/events"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// syncVolume deletes the asset and then the PV of a released volume whose
// reclaim policy is Delete, and lets go of deleted PVs it holds a finalizer on.
func (c *ProvisionController) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !c.volumeIsOurs(pv) || c.deleted.has(pv.UID) {
		return nil
	}
	ours := c.hasOwnFinalizer(pv)
	if pv.DeletionTimestamp != nil && ours && pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		// Retained: the asset stays, the PV object may go.
		return c.removeFinalizer(ctx, pv)
	}
	if err := gate.DeleteVolume(pv, ours); err != nil {
		// Not released, retained, or still in use (kube-controller-manager
		// releases it when the claim goes).
		klog.FromContext(ctx).V(4).Info("Not deleting volume", "pv", klog.KObj(pv), "reason", err)
		return nil
	}
	return c.deleteVolume(ctx, pv)
}

// volumeIsOurs tells whether the controller deletes the PV once it is
// Released: one it provisioned and, with WithUnprovisionedVolumeDeletion, the
// others sig-storage-lib-external-provisioner v13 deletes (its
// isProvisionerForVolume): a PV that another provisioner made for a name
// migrated to ours, a static CSI PV of our driver, a static in-tree PV
// migrated to it. Anyone who can write PVs can set these annotations and
// fields: the provisioner's Delete checks the volume source before it deletes.
func (c *ProvisionController) volumeIsOurs(pv *corev1.PersistentVolume) bool {
	migratedToUs := c.cfg.unprovisionedDeletion && c.names.Has(pv.Annotations[AnnMigratedTo])
	if provisioner, ok := pv.Annotations[AnnProvisionedBy]; ok {
		return c.names.Has(provisioner) || migratedToUs
	}
	if pv.Spec.CSI != nil {
		return c.cfg.unprovisionedDeletion && c.names.Has(pv.Spec.CSI.Driver)
	}
	return migratedToUs
}

func (c *ProvisionController) deleteVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	logger := klog.FromContext(ctx).WithValues("pv", klog.KObj(pv))
	ctx = klog.NewContext(ctx, logger)
	failureKey := volumeFailures(pv)
	if c.failures.exhausted(failureKey, pv.ResourceVersion, c.cfg.failedDeleteThreshold) {
		return nil
	}
	if guard, ok := c.provisioner.(DeletionGuard); ok && !guard.ShouldDelete(ctx, pv) {
		logger.V(2).Info("Deletion vetoed by the provisioner")
		return nil
	}
	className := pv.Spec.StorageClassName
	start := time.Now()
	logger.V(2).Info("Deleting volume")
	err := c.callDelete(ctx, pv)
	if IsIgnored(err) {
		logger.V(2).Info("Provisioner does not own this volume; leaving it", "reason", err)
		return nil
	}
	if err != nil {
		c.metrics.deleteFailed.WithLabelValues(className).Inc()
		if c.failures.record(failureKey, pv.ResourceVersion, c.cfg.failedDeleteThreshold) {
			c.events.Event(events.VolumeReference(pv), className, corev1.EventTypeWarning, EventVolumeFailedDelete,
				"%v; giving up after %d attempts: fix the cause, then change the PV (for example add an annotation) or restart the provisioner to retry",
				err, c.cfg.failedDeleteThreshold)
			return nil
		}
		c.events.Event(events.VolumeReference(pv), className, corev1.EventTypeWarning, EventVolumeFailedDelete, "%v", err)
		return err
	}
	// The asset is gone; now the PV object, which must never outlive it stuck.
	if c.hasOwnFinalizer(pv) {
		if err := c.removeFinalizer(ctx, pv); err != nil {
			return err
		}
	}
	if pv.DeletionTimestamp == nil {
		uid := pv.UID
		err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
		}
	}
	c.deleted.add(pv.UID)
	c.failures.reset(failureKey)
	c.metrics.deleteTotal.WithLabelValues(className).Inc()
	c.metrics.deleteDuration.WithLabelValues(className).Observe(time.Since(start).Seconds())
	logger.V(2).Info("Volume deleted")
	return nil
}

func (c *ProvisionController) callDelete(ctx context.Context, pv *corev1.PersistentVolume) error {
	return c.guardedDelete(ctx, pv.Name, func(ctx context.Context) error { return c.provisioner.Delete(ctx, pv) })
}

// guardedDelete runs one deletion call of the provisioner for pvName within
// the operation timeout, counted in flight, a panic turned into an error.
func (c *ProvisionController) guardedDelete(ctx context.Context, pvName string, call func(context.Context) error) (err error) {
	opCtx, cancel := c.operationContext(ctx)
	defer cancel()
	c.metrics.inFlight.WithLabelValues("delete").Inc()
	defer c.metrics.inFlight.WithLabelValues("delete").Dec()
	defer c.calls.begin("delete", pvName)()
	defer func() {
		if r := recover(); r != nil {
			err = c.panicked(ctx, "delete", pvName, r)
		}
	}()
	return call(opCtx)
}

func (c *ProvisionController) removeFinalizer(ctx context.Context, pv *corev1.PersistentVolume) error {
	updated := pv.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, c.isOwnFinalizer)
	_, err := c.client.CoreV1().PersistentVolumes().Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing finalizer from PersistentVolume %s: %w", pv.Name, err)
	}
	return nil
}

// isOwnFinalizer: the controller's finalizer, or the one PVs made by
// sig-storage-lib-external-provisioner carry, which it takes over.
func (c *ProvisionController) isOwnFinalizer(f string) bool {
	return f == c.cfg.finalizer || f == VolumeFinalizer || f == SigStorageLibFinalizer
}

func (c *ProvisionController) hasOwnFinalizer(pv *corev1.PersistentVolume) bool {
	return slices.ContainsFunc(pv.Finalizers, c.isOwnFinalizer)
}
