// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// fairnessBound is how long another namespace's claim may wait for its
// volume, or its first event, while one namespace floods the provisioner.
const fairnessBound = 30 * time.Second

// A namespace whose backend blocks in Provision (as a slow one that honors
// its context until --timeout) with more claims than there are workers does
// not hold every worker: another namespace's claim is Bound while the first
// namespace's calls are still blocked.
func TestBlockedNamespaceLeavesAWorkerForOthers(t *testing.T) {
	const workers = 4
	ctx := framework.TestContext(t, 3*time.Minute)
	name := uniqueName("workers")
	store := newStore(t)
	release := make(chan struct{})
	var blocked, mostBlocked atomic.Int32
	store.BeforeProvision = func(ctx context.Context, o controller.ProvisionOptions) (controller.ProvisioningState, error) {
		if !strings.HasPrefix(o.PVC.Namespace, "slow") {
			return "", nil
		}
		n := blocked.Add(1)
		defer blocked.Add(-1)
		// Record the most calls ever blocked at once (a lock-free max).
		for m := mostBlocked.Load(); n > m; m = mostBlocked.Load() {
			if mostBlocked.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
			return "", nil
		case <-ctx.Done():
			return controller.ProvisioningFinished, fmt.Errorf("backend too slow: %w", ctx.Err())
		}
	}
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(releaseOnce) // before the controller stops (cleanups run last first)
	runController(t, name, store, controller.WithThreadiness(workers))
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	slow := cp.CreateTestNamespace(t, "slow")
	deleteClaimsAtEnd(t, slow)
	for i := range 3 * workers {
		createClaim(t, ctx, framework.NewPVC(slow, fmt.Sprintf("flood-%d", i), sc.Name, "1Gi"))
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return blocked.Load() >= workers-1, nil
	}); err != nil {
		t.Fatalf("the slow namespace's calls did not start: %v", err)
	}

	calm := cp.CreateTestNamespace(t, "calm")
	deleteClaimsAtEnd(t, calm)
	pvc := createClaim(t, ctx, framework.NewPVC(calm, "data", sc.Name, "1Gi"))
	boundCtx, cancel := context.WithTimeout(ctx, fairnessBound)
	defer cancel()
	start := time.Now()
	if _, _, err := framework.WaitForPVCBound(boundCtx, client, calm, pvc.Name); err != nil {
		t.Fatalf("another namespace's claim was not Bound within %v while %d calls of the slow namespace blocked every worker: %v",
			fairnessBound, blocked.Load(), err)
	}
	t.Logf("calm claim Bound %v after creation, %d slow calls blocked", time.Since(start).Round(time.Millisecond), blocked.Load())
	if n := mostBlocked.Load(); n > workers-1 {
		t.Errorf("the slow namespace held %d workers at once, want at most %d (all but one)", n, workers-1)
	}
	releaseOnce()
	for i := range 3 * workers {
		if _, _, err := framework.WaitForPVCBound(ctx, client, slow, fmt.Sprintf("flood-%d", i)); err != nil {
			t.Fatalf("the slow namespace's claims were not provisioned once the backend answered: %v", err)
		}
	}
}

// A namespace whose claims all fail, at the binaries' default event budget
// (5/s), has a backlog of Warning events minutes long; another namespace's
// claims still get their first event, a failure's Warning and a success's
// ProvisioningSucceeded, within the bound.
func TestEventFloodOfOneNamespaceDoesNotDelayAnother(t *testing.T) {
	const flood = 300 // a minute of the budget
	ctx := framework.TestContext(t, 4*time.Minute)
	name := uniqueName("eventflood")
	events := defaultBudgetEventClient(t)
	store := newStore(t)
	store.BeforeProvision = func(_ context.Context, o controller.ProvisionOptions) (controller.ProvisioningState, error) {
		if strings.HasPrefix(o.PVC.Namespace, "loud") || o.PVC.Name == "bad" {
			return controller.ProvisioningFinished, fmt.Errorf("backend refuses claim %s", o.PVC.Name)
		}
		return "", nil
	}
	runController(t, name, store, controller.WithEventClient(events))
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	loud := cp.CreateTestNamespace(t, "loud")
	deleteClaimsAtEnd(t, loud)
	for i := range flood {
		createClaim(t, ctx, framework.NewPVC(loud, fmt.Sprintf("flood-%d", i), sc.Name, "1Gi"))
	}
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(loud).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
		return err == nil && len(list.Items) > 0, err
	}); err != nil {
		t.Fatalf("the loud namespace's claims got no Warning: %v", err)
	}

	calm := cp.CreateTestNamespace(t, "calm")
	deleteClaimsAtEnd(t, calm)
	bad := createClaim(t, ctx, framework.NewPVC(calm, "bad", sc.Name, "1Gi"))
	good := createClaim(t, ctx, framework.NewPVC(calm, "good", sc.Name, "1Gi"))
	// kube-controller-manager (at its default 20 QPS) names the provisioner
	// on the flood's claims first: the provisioner's part starts after that.
	for _, pvc := range []*corev1.PersistentVolumeClaim{bad, good} {
		if _, err := framework.WaitForPVCAnnotation(ctx, client, calm, pvc.Name, framework.AnnStorageProvisioner); err != nil {
			t.Fatal(err)
		}
	}
	// Ordering, not a time: each of the calm claims' events is written
	// while the loud namespace still has most of its warnings waiting (the
	// budget writes 5 a second; its backlog is a minute long).
	for _, want := range []struct {
		claim  *corev1.PersistentVolumeClaim
		reason string
	}{{bad, controller.EventProvisioningFailed}, {good, controller.EventProvisioningSucceeded}} {
		if _, err := framework.WaitForEvent(ctx, client, want.claim, want.reason); err != nil {
			t.Fatal(err)
		}
		list, err := client.CoreV1().Events(loud).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("claim %s got its %s event when %d of the %d loud claims had their Warning", want.claim.Name, want.reason, len(list.Items), flood)
		if len(list.Items) > flood/2 {
			t.Errorf("claim %s of another namespace got its %s event only after %d of the %d loud claims' Warnings were written: it waited behind their backlog",
				want.claim.Name, want.reason, len(list.Items), flood)
		}
	}
}

// deleteClaimsAtEnd deletes the claims of namespace ns when the test ends,
// before the namespace and the controller go, and waits until they are
// gone. Without it they stay in etcd (the framework finalizes namespaces
// itself; no namespace controller empties them), and kube-controller-manager
// syncs every one of them each second for the rest of the package: the
// hundreds these tests would leave Pending load every later test (one
// that needs a claim bound within the journal's lazy removal, 5 s, such as
// TestLibraryRBACIsEnough's graceful stops, can then miss it).
func deleteClaimsAtEnd(t *testing.T, ns string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		claims := client.CoreV1().PersistentVolumeClaims(ns)
		if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("cleanup: deleting the claims of %s: %v", ns, err)
			return
		}
		if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := claims.List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil && len(list.Items) == 0, nil
		}); err != nil {
			t.Errorf("cleanup: the claims of %s are not gone: %v", ns, err)
		}
	})
}
