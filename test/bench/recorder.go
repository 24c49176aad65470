// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprov/external-storage/test/framework"
)

// recorder timestamps each claim's stages as the watches see them.
type recorder struct {
	namespace string

	mu        sync.Mutex
	created   map[types.UID]time.Time
	annotated map[types.UID]time.Time // kube-controller-manager named the provisioner
	pvCreated map[types.UID]time.Time
	bound     map[types.UID]time.Time
	byName    map[string]string // claim name -> PV name
	delIssued map[string]time.Time
	pvGone    map[string]time.Time
	changed   chan struct{}
}

func newRecorder(ns string) *recorder {
	return &recorder{
		namespace: ns, created: map[types.UID]time.Time{}, annotated: map[types.UID]time.Time{}, pvCreated: map[types.UID]time.Time{},
		bound: map[types.UID]time.Time{}, byName: map[string]string{}, delIssued: map[string]time.Time{},
		pvGone: map[string]time.Time{}, changed: make(chan struct{}, 1),
	}
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) claimCreated(uid types.UID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created[uid] = at
}

func (r *recorder) claimSeen(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Namespace != r.namespace {
		return
	}
	r.mu.Lock()
	if _, ok := r.annotated[pvc.UID]; !ok && pvc.Annotations[framework.AnnStorageProvisioner] != "" {
		r.annotated[pvc.UID] = time.Now()
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		r.mu.Unlock()
		return
	}
	if _, ok := r.bound[pvc.UID]; !ok {
		r.bound[pvc.UID] = time.Now()
		r.byName[pvc.Name] = pvc.Spec.VolumeName
	}
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) volumeAdded(pv *corev1.PersistentVolume) {
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != r.namespace {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pvCreated[pv.Spec.ClaimRef.UID] = time.Now()
}

func (r *recorder) volumeDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != r.namespace {
		return
	}
	r.mu.Lock()
	r.pvGone[pv.Name] = time.Now()
	r.mu.Unlock()
	r.notify()
}

func (r *recorder) deleteIssued(claim string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delIssued[r.byName[claim]] = at
}

func (r *recorder) waitFor(ctx context.Context, what string, n int, count func() int) error {
	for {
		r.mu.Lock()
		got := count()
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d %s: %w", got, n, what, ctx.Err())
		case <-r.changed:
		case <-time.After(time.Second):
		}
	}
}

func (r *recorder) waitBound(ctx context.Context, n int) error {
	return r.waitFor(ctx, "claims bound", n, func() int { return len(r.bound) })
}

func (r *recorder) waitVolumesGone(ctx context.Context, n int) error {
	return r.waitFor(ctx, "volumes deleted", n, func() int { return len(r.pvGone) })
}

// provisionStats are per-claim latencies and the rate of each stage.
type provisionStats struct {
	toPV, toBound, endToEnd []time.Duration
	// toAnnotated is kube-controller-manager's part of toPV (naming the
	// provisioner on the claim), fromAnnotated the provisioner's own.
	toAnnotated, fromAnnotated []time.Duration
	// provisionRate: claims from the first claim created to the last PV
	// created; bindRate: from the first PV to the last claim bound;
	// boundRate: from the first claim created to the last one bound.
	provisionRate, bindRate, boundRate float64
}

func (r *recorder) provisionStats() provisionStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s provisionStats
	var firstCreated, lastPV, firstPV, lastBound time.Time
	for uid, c := range r.created {
		pv, b := r.pvCreated[uid], r.bound[uid]
		s.toPV = append(s.toPV, pv.Sub(c))
		if a, ok := r.annotated[uid]; ok {
			s.toAnnotated = append(s.toAnnotated, a.Sub(c))
			s.fromAnnotated = append(s.fromAnnotated, pv.Sub(a))
		}
		s.toBound = append(s.toBound, b.Sub(pv))
		s.endToEnd = append(s.endToEnd, b.Sub(c))
		if firstCreated.IsZero() || c.Before(firstCreated) {
			firstCreated = c
		}
		if firstPV.IsZero() || pv.Before(firstPV) {
			firstPV = pv
		}
		if pv.After(lastPV) {
			lastPV = pv
		}
		if b.After(lastBound) {
			lastBound = b
		}
	}
	n := float64(len(r.created))
	s.provisionRate = n / lastPV.Sub(firstCreated).Seconds()
	s.bindRate = n / lastBound.Sub(firstPV).Seconds()
	s.boundRate = n / lastBound.Sub(firstCreated).Seconds()
	return s
}

func (r *recorder) deleteStats() ([]time.Duration, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	var first, last time.Time
	for pv, issued := range r.delIssued {
		gone := r.pvGone[pv]
		out = append(out, gone.Sub(issued))
		if first.IsZero() || issued.Before(first) {
			first = issued
		}
		if gone.After(last) {
			last = gone
		}
	}
	return out, float64(len(out)) / last.Sub(first).Seconds()
}
