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
	"k8s.io/client-go/tools/pager"
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
//     whose decoder reads only those few fields (see cachedecode.CoreV1).
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
	core, pages := cachedecode.CoreV1(client)
	if core == nil {
		core, pages = client.CoreV1(), client.CoreV1()
	}
	f.InformerFor(&corev1.PersistentVolumeClaim{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newUnsettledClaimInformer(core, pages, resync)
	})
	if keepVolume == nil {
		// keepVolume reads the whole PV: a bound one must then be decoded whole.
		f.InformerFor(&corev1.PersistentVolume{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return newVolumeInformer(core, pages, resync)
		})
	}
	return trimmedFactory{f}
}

// listPageSize is how many objects a page of the claim and PV informers'
// lists holds: a list of 100,000 claims takes 20 requests, and no response
// is more than a few megabytes.
const listPageSize = 5000

// pagedListWatch lists in pages of listPageSize, never by a watch-list
// stream. At 100,000 bound claims a stream cost kube-apiserver about twice
// the CPU of a list, which on a busy control plane was most of a restart's
// time, and a list in one response is held whole while it is decoded (over
// 500 MB at the start-up's peak).
type pagedListWatch struct {
	*cache.ListWatch
}

// IsWatchListSemanticsUnSupported tells the reflector to list.
func (pagedListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// newPagedListWatch lists with list, the first page of each list through
// first and the further pages through pages, and watches with watch.
func newPagedListWatch[L runtime.Object](first, pages func(context.Context, metav1.ListOptions) (L, error), watch cache.WatchFuncWithContext) pagedListWatch {
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Continue == "" {
				return first(ctx, opts)
			}
			return pages(ctx, opts)
		})
		p.PageSize = listPageSize
		// The reflector's "0" (any version) is served from the watch cache
		// whole, ignoring the limit; a consistent read ("") is served from
		// it in pages, and is as fresh as any version the reflector asks for.
		opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit = "", "", 0
		l, _, err := p.ListWithAlloc(ctx, opts)
		return l, err
	}
	return pagedListWatch{&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watch}}
}

// newUnsettledClaimInformer is the claim informer of NewInformerFactory: the
// factory's own, listing and watching through core (and pages), with
// settled claims filtered out of its list and watch.
func newUnsettledClaimInformer(core, pages corev1client.CoreV1Interface, resync time.Duration) cache.SharedIndexInformer {
	unsettled := func(claims corev1client.PersistentVolumeClaimInterface) func(context.Context, metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
		return func(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
			l, err := claims.List(ctx, opts)
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
	lw := newPagedListWatch(unsettled(core.PersistentVolumeClaims(metav1.NamespaceAll)), unsettled(pages.PersistentVolumeClaims(metav1.NamespaceAll)), watchUnsettled)
	return cache.NewSharedIndexInformerWithOptions(lw, &corev1.PersistentVolumeClaim{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// newVolumeInformer is the PV informer of NewInformerFactory: the factory's
// own, listing and watching through core (and pages).
func newVolumeInformer(core, pages corev1client.CoreV1Interface, resync time.Duration) cache.SharedIndexInformer {
	lw := newPagedListWatch(core.PersistentVolumes().List, pages.PersistentVolumes().List, core.PersistentVolumes().Watch)
	return cache.NewSharedIndexInformerWithOptions(lw, &corev1.PersistentVolume{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}})
}
