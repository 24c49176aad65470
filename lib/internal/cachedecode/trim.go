// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cachedecode

import (
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// StripManagedFields drops managed fields from cached objects: they are most
// of an object's size and the controller never reads them.
func StripManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// ClaimSettled reports whether a claim is bound and not being deleted:
// nothing for a provisioner to do until it is deleted.
func ClaimSettled(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeName != "" && claim.DeletionTimestamp == nil
}

// UnsettledClaimEvent is the claim informer's watch filter: settled
// claims stay out of the cache.
func UnsettledClaimEvent(e watch.Event) (watch.Event, bool) {
	if settled, ok := e.Object.(*settledClaim); ok {
		if e.Type == watch.Added {
			return claimBookmark(settled.resourceVersion), true
		}
		whole, err := settled.whole()
		if err != nil {
			return watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(err).ErrStatus}, true
		}
		e.Object = whole
	}
	claim, ok := e.Object.(*corev1.PersistentVolumeClaim)
	if !ok || !ClaimSettled(claim) || e.Type == watch.Deleted {
		return e, true
	}
	if e.Type == watch.Added {
		// Bound before the cache saw it: only its resource version goes on,
		// as a bookmark, so that the informer's stream position advances
		// and a start-up that skips 100,000 bound claims is not taken for
		// a stalled stream. Nothing else of the claim: its annotations
		// could mimic the end of the initial events.
		return claimBookmark(claim.ResourceVersion), true
	}
	// Bound now, maybe cached unbound: leaves the cache (a delete of a claim
	// the cache does not hold is ignored by it).
	e.Type = watch.Deleted
	return e, true
}

func claimBookmark(resourceVersion string) watch.Event {
	return watch.Event{Type: watch.Bookmark, Object: &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: resourceVersion},
	}}
}

// Trim is the transform of NewInformerFactory. It trims the decoded
// object in place rather than copying what it keeps: a copy would be
// allocated among the garbage of the objects being decoded, and Go's heap,
// which never moves objects, would keep the half-empty pages of that
// garbage. What many objects hold alike (namespaces, the provisioner's name)
// is stored once. Claims reach it only unsettled, or on their way out of
// the cache (whole, so that handlers see what the claim was bound from).
func Trim(obj any, keepVolume func(full, cached *corev1.PersistentVolume)) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		// Of a node a provisioner reads its labels, taints and addresses;
		// its image list and conditions are most of it and change often.
		o.ObjectMeta = metav1.ObjectMeta{
			Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
			Labels: o.Labels, Annotations: o.Annotations,
		}
		o.Status = corev1.NodeStatus{
			Addresses: o.Status.Addresses, Capacity: o.Status.Capacity, Allocatable: o.Status.Allocatable, NodeInfo: o.Status.NodeInfo,
		}
		return o, nil
	case *corev1.PersistentVolume:
		if o.Status.Phase == corev1.VolumeBound && o.DeletionTimestamp == nil {
			var full *corev1.PersistentVolume
			if keepVolume != nil {
				full = &corev1.PersistentVolume{ObjectMeta: o.ObjectMeta, Spec: o.Spec}
			}
			claim := o.Spec.ClaimRef
			if claim != nil {
				*claim = corev1.ObjectReference{Namespace: unique.Make(claim.Namespace).Value(), Name: claim.Name, UID: claim.UID}
			}
			o.ObjectMeta = metav1.ObjectMeta{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
				Annotations: provisionedByAnnotations(o.Annotations[AnnProvisionedBy])}
			o.Spec = corev1.PersistentVolumeSpec{ClaimRef: claim}
			o.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}
			if full != nil {
				keepVolume(full, o)
			}
			return o, nil
		}
	}
	return StripManagedFields(obj)
}

// provisionedBy holds one annotation map per provisioner name, shared by
// every bound PV cached with that name: cached objects are read-only.
var provisionedBy sync.Map // name -> map[string]string

func provisionedByAnnotations(name string) map[string]string {
	if name == "" {
		return nil
	}
	if m, ok := provisionedBy.Load(name); ok {
		return m.(map[string]string)
	}
	m, _ := provisionedBy.LoadOrStore(name, map[string]string{AnnProvisionedBy: name})
	return m.(map[string]string)
}
