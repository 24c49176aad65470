// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"time"

	"github.com/kubeprov/external-storage/lib/internal/cachedecode"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

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
//     whose decoder reads only those few fields (see cachedecode.CoreV1),
//     and they list rather than stream, reading the list one object at a
//     time (see cachedecode.ListClaims).
//
// A provisioner that reads volumes itself shares such a factory with
// WithInformerFactory, and keepVolume copies into a bound PV's cached form
// what it reads beyond that (nil: nothing). Other injected factories are
// shared with code the controller knows nothing of, so their objects only
// lose managed fields.
func NewInformerFactory(client kubernetes.Interface, resync time.Duration, keepVolume func(full, cached *corev1.PersistentVolume)) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(func(obj any) (any, error) {
		return cachedecode.Trim(obj, keepVolume)
	}))
	core := cachedecode.CoreV1(client)
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

// listWatch lists and watches with the reflector's list, never a watch-list
// stream: see cachedecode.ListClaims.
type listWatch struct {
	*cache.ListWatch
}

// IsWatchListSemanticsUnSupported tells the reflector to list. (Its log
// line at -v=2 then calls this expected only in unit tests.)
func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// newUnsettledClaimInformer is the claim informer of NewInformerFactory: the
// factory's own, listing and watching through core (nil: client), with
// settled claims filtered out of its list and watch.
func newUnsettledClaimInformer(client kubernetes.Interface, core corev1client.CoreV1Interface, resync time.Duration) cache.SharedIndexInformer {
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cachedecode.ListClaims(ctx, core, opts)
	}
	if core == nil {
		core = client.CoreV1()
		list = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			unsettled := l.Items[:0]
			for i := range l.Items {
				if !cachedecode.ClaimSettled(&l.Items[i]) {
					unsettled = append(unsettled, l.Items[i])
				}
			}
			l.Items = unsettled
			return l, nil
		}
	}
	watchUnsettled := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		w, err := core.PersistentVolumeClaims(metav1.NamespaceAll).Watch(ctx, opts)
		if err != nil {
			return nil, err
		}
		return watch.Filter(w, cachedecode.UnsettledClaimEvent), nil
	}
	lw := listWatch{&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchUnsettled}}
	return cache.NewSharedIndexInformerWithOptions(lw, &corev1.PersistentVolumeClaim{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// newVolumeInformer is the PV informer of NewInformerFactory: the factory's
// own, listing and watching through core (nil: client).
func newVolumeInformer(client kubernetes.Interface, core corev1client.CoreV1Interface, resync time.Duration) cache.SharedIndexInformer {
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cachedecode.ListVolumes(ctx, core, opts)
	}
	if core == nil {
		core = client.CoreV1()
		list = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return core.PersistentVolumes().List(ctx, opts)
		}
	}
	lw := listWatch{&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return core.PersistentVolumes().Watch(ctx, opts)
	}}}
	return cache.NewSharedIndexInformerWithOptions(lw, &corev1.PersistentVolume{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
}
