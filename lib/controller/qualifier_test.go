// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// retryingStore qualifies no claim until told to, and asks for a retry.
type retryingStore struct {
	*dirStore
	ok         bool
	retryAfter time.Duration
	calls      int
}

func (r *retryingStore) ShouldProvision(context.Context, *corev1.PersistentVolumeClaim) bool {
	panic("ShouldProvision called on a RetryingQualifier")
}

func (r *retryingStore) QualifyClaim(context.Context, *corev1.PersistentVolumeClaim) (bool, time.Duration) {
	r.calls++
	return r.ok, r.retryAfter
}

func TestRetryingQualifierClaimIsLookedAtAgainAfterTheDelay(t *testing.T) {
	r := &retryingStore{dirStore: newStore(t), retryAfter: 50 * time.Millisecond}
	f := newFixture(t, r, nil, class("gold"), claim("c", "gold"))
	start := time.Now()
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if n := r.provisionCount(); n != 0 || len(f.pendingEvents()) != 0 {
		t.Fatalf("a claim that does not qualify: %d Provision calls, events %+v", n, f.pendingEvents())
	}
	// The claim comes back to the queue by itself, after the delay.
	key, _ := f.c.claimQueue.Get()
	if key != "ns/c" || time.Since(start) < r.retryAfter {
		t.Fatalf("got %q after %v, want ns/c after %v", key, time.Since(start), r.retryAfter)
	}
	f.c.claimQueue.Done(key)
	r.ok = true
	if err := f.c.syncClaim(f.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := r.provisionCount(); n != 1 {
		t.Fatalf("Provision called %d times once the claim qualifies, want 1", n)
	}
}

func TestRetryingQualifierWithoutDelayIsNotRequeued(t *testing.T) {
	r := &retryingStore{dirStore: newStore(t)}
	f := newFixture(t, r, nil, class("gold"), claim("c", "gold"))
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if r.calls != 1 {
		t.Fatalf("QualifyClaim called %d times, want 1", r.calls)
	}
	if n := f.c.claimQueue.Len(); n != 0 {
		t.Fatalf("%d keys queued for a claim that does not qualify", n)
	}
}
