// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
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
// none is injected. Its caches hold what the controller works on, whole
// (less managed fields), and little of what has settled, which is nearly all
// of a cluster's objects:
//
//   - Bound claims are not cached at all. The claim informer's watch turns a
//     claim's binding into its deletion, and the lister answers NotFound for
//     it (the controller asks the API server when it must know). A bound
//     claim being deleted is cached again, whole.
//   - Of a bound PV the cache keeps its identity, its claim reference and
//     the provisioned-by annotation: what tells when it becomes the
//     controller's business (released or deleted), at which point the update
//     brings the whole object again.
//   - Neither is decoded whole (a bound PV is when keepVolume is given): the
//     claim and PV informers list and watch through a client of their own
//     whose decoder reads only those few fields (see settledDecodingCore).
//
// A provisioner that reads volumes itself shares such a factory with
// WithInformerFactory, and keepVolume copies into a bound PV's cached form
// what it reads beyond that (nil: nothing). Other injected factories are
// shared with code the controller knows nothing of, so their objects only
// lose managed fields.
func NewInformerFactory(client kubernetes.Interface, resync time.Duration, keepVolume func(full, cached *corev1.PersistentVolume)) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(func(obj any) (any, error) {
		return trimForCache(obj, keepVolume)
	}))
	core := settledDecodingCore(client)
	if core == nil {
		core = client.CoreV1()
	}
	f.InformerFor(&corev1.PersistentVolumeClaim{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newUnsettledClaimInformer(client, core, resync)
	})
	if keepVolume == nil {
		// keepVolume reads the whole PV: a bound one must then be decoded whole.
		f.InformerFor(&corev1.PersistentVolume{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return newVolumeInformer(client, core, resync)
		})
	}
	return trimmedFactory{f}
}

// claimSettled reports whether a claim is bound and not being deleted:
// nothing for a provisioner to do until it is deleted.
func claimSettled(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeName != "" && claim.DeletionTimestamp == nil
}

// newUnsettledClaimInformer is the claim informer of NewInformerFactory: the
// factory's own, listing and watching through core, with settled claims
// filtered out of its list and watch.
func newUnsettledClaimInformer(client kubernetes.Interface, core corev1client.CoreV1Interface, resync time.Duration) cache.SharedIndexInformer {
	claims := core.PersistentVolumeClaims(metav1.NamespaceAll)
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		l, err := claims.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		unsettled := l.Items[:0]
		for i := range l.Items {
			if !claimSettled(&l.Items[i]) {
				unsettled = append(unsettled, l.Items[i])
			}
		}
		l.Items = unsettled
		return l, nil
	}
	watchUnsettled := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		w, err := claims.Watch(ctx, opts)
		if err != nil {
			return nil, err
		}
		return watch.Filter(w, unsettledClaimEvent), nil
	}
	lw := &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchUnsettled}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.PersistentVolumeClaim{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// newVolumeInformer is the PV informer of NewInformerFactory: the factory's
// own, listing and watching through core.
func newVolumeInformer(client kubernetes.Interface, core corev1client.CoreV1Interface, resync time.Duration) cache.SharedIndexInformer {
	volumes := core.PersistentVolumes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return volumes.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return volumes.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.PersistentVolume{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
}

// unsettledClaimEvent is the claim informer's watch filter: settled
// claims stay out of the cache.
func unsettledClaimEvent(e watch.Event) (watch.Event, bool) {
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
	if !ok || !claimSettled(claim) || e.Type == watch.Deleted {
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

// trimForCache is the transform of NewInformerFactory. It trims the decoded
// object in place rather than copying what it keeps: a copy would be
// allocated among the garbage of the objects being decoded, and Go's heap,
// which never moves objects, would keep the half-empty pages of that
// garbage. What many objects hold alike (namespaces, the provisioner's name)
// is stored once. Claims reach it only unsettled, or on their way out of
// the cache (whole, so that handlers see what the claim was bound from).
func trimForCache(obj any, keepVolume func(full, cached *corev1.PersistentVolume)) (any, error) {
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
	return stripManagedFields(obj)
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
