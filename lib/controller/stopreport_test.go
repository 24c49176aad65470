// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// stuckProvisioner's Provision ignores its context: it returns only when
// released, as local-path's did while waiting on a stuck helper pod.
type stuckProvisioner struct {
	*dirStore
	called, release chan struct{}
}

func (s *stuckProvisioner) Provision(_ context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	close(s.called)
	<-s.release
	return s.dirStore.Provision(context.Background(), o)
}

// A stop that waits on a Provision ignoring its canceled context says so at
// default verbosity, naming the claim and how long the call has run, counts
// it once, and still waits for it.
func TestStopReportsCallsThatIgnoreTheirContext(t *testing.T) {
	_, base := ktesting.NewTestContext(t)
	ctx, logged := defaultVerbosityLog(t, base)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &stuckProvisioner{dirStore: newStore(t), called: make(chan struct{}), release: make(chan struct{})}
	c, err := NewProvisionController(fake.NewClientset(class("gold"), claim("c", "gold")), testProvisioner, p,
		WithoutLeaderElection(), WithStopGracePeriod(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-p.called:
	case <-time.After(30 * time.Second):
		t.Fatal("Provision was not called")
	}
	cancel()
	const want = "Stopping waits for a call that ignores its canceled context"
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Count(logged(), want) >= 2, nil
	}); err != nil {
		t.Fatalf("no repeated report of the stuck call at default verbosity:\n%s", logged())
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while Provision was still running", err)
	default:
	}
	out := logged()
	for _, s := range []string{`operation="provision"`, `object="ns/c"`, "running="} {
		if !strings.Contains(out, s) {
			t.Errorf("the report does not say %s:\n%s", s, out)
		}
	}
	if got := testutil.ToFloat64(c.metrics.stopOverdue.WithLabelValues("provision")); got != 1 {
		t.Errorf("controller_stop_overdue_calls_total{operation=provision} = %v after repeated reports of one call, want 1", got)
	}
	close(p.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return once Provision did")
	}
	if _, err := NewProvisionController(fake.NewClientset(), testProvisioner, newStore(t), WithStopGracePeriod(0)); err == nil {
		t.Error("WithStopGracePeriod(0) accepted")
	}
}
