// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PVs made by sig-storage-lib-external-provisioner carry its finalizer: after
// a port, deleting such a PV before its claim still deletes the asset, and
// the PV never stays Terminating.
func TestSigStorageLibFinalizerIsTakenOver(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		policy     corev1.PersistentVolumeReclaimPolicy
		wantDelete int
	}{
		{"reclaim Delete: asset deleted, then the finalizer removed", corev1.PersistentVolumeReclaimDelete, 1},
		{"reclaim Retain: asset kept, the finalizer removed", corev1.PersistentVolumeReclaimRetain, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := releasedPV("pv-old", tc.policy, func(pv *corev1.PersistentVolume) {
				pv.Finalizers = []string{SigStorageLibFinalizer, "kubernetes.io/pv-protection"}
				pv.DeletionTimestamp = &now
			})
			f := newFixture(t, newStore(t), nil, old)
			if err := f.c.syncVolume(f.ctx, "pv-old"); err != nil {
				t.Fatal(err)
			}
			if len(f.store.deletes) != tc.wantDelete {
				t.Fatalf("%d asset deletions, want %d", len(f.store.deletes), tc.wantDelete)
			}
			pv := f.pv("pv-old")
			if pv == nil {
				t.Fatal("PV gone: only its finalizer was to be removed")
			}
			if slices.Contains(pv.Finalizers, SigStorageLibFinalizer) || !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
				t.Fatalf("finalizers %v, want only kubernetes.io/pv-protection left", pv.Finalizers)
			}
		})
	}
}

// In a pod, the journal and the Lease live in the pod's namespace and leader
// election is on, as sig-storage-lib-external-provisioner defaults; outside
// a cluster both fall back to OutOfClusterNamespace with leader election off.
func TestDefaultsFollowThePodNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "storage-system")
	f := newFixture(t, newStore(t), nil)
	if f.c.cfg.journalNamespace != "storage-system" || !f.c.cfg.leaderElection || f.c.cfg.leaderNamespace != "storage-system" {
		t.Fatalf("in a pod: journal namespace %q, leader election %v in %q; want storage-system, on, storage-system",
			f.c.cfg.journalNamespace, f.c.cfg.leaderElection, f.c.cfg.leaderNamespace)
	}
	f = newFixture(t, newStore(t), []Option{WithoutLeaderElection()})
	if f.c.cfg.leaderElection {
		t.Fatal("WithoutLeaderElection left leader election on")
	}

	t.Setenv("POD_NAMESPACE", "")
	if _, inCluster := InClusterNamespace(); inCluster {
		t.Skip("this test process runs in a pod: the out-of-cluster defaults cannot be observed")
	}
	f = newFixture(t, newStore(t), nil)
	if f.c.cfg.journalNamespace != OutOfClusterNamespace || f.c.cfg.leaderElection {
		t.Fatalf("outside a cluster: journal namespace %q, leader election %v; want %q, off",
			f.c.cfg.journalNamespace, f.c.cfg.leaderElection, OutOfClusterNamespace)
	}
}

// Failure counts are kept per object kind and UID: a claim and a PV that
// happen to share a UID string never share a count.
func TestFailureKeysAreTyped(t *testing.T) {
	var f failures
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: "same"}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{UID: "same"}}
	f.record(claimFailures(claim), "1", 2)
	if f.record(volumeFailures(pv), "1", 2) {
		t.Fatal("a PV's first failure reached the threshold of 2: it counted the claim's")
	}
	if !f.record(claimFailures(claim), "1", 2) {
		t.Fatal("the claim's second failure did not reach the threshold of 2")
	}
	if f.exhausted(claimFailures(claim), "2", 2) {
		t.Fatal("a changed claim (new resourceVersion) is still given up")
	}
}

// TestFinalizerName: a provisioner that replaces the CSI external-provisioner
// puts that one's finalizer on its PVs, so either can take them back.
func TestFinalizerName(t *testing.T) {
	f := newFixture(t, newStore(t), []Option{WithFinalizer(true), WithFinalizerName(SigStorageLibFinalizer)},
		class("gold"), claim("data", "gold"))
	if err := f.c.syncClaim(f.ctx, "ns/data"); err != nil {
		t.Fatal(err)
	}
	pv := f.pv("pvc-uid-data")
	if pv == nil || !slices.Equal(pv.Finalizers, []string{SigStorageLibFinalizer}) {
		t.Fatalf("PV %v, want finalizers [%s]", pv, SigStorageLibFinalizer)
	}
	if _, err := NewProvisionController(f.client, testProvisioner, f.store, WithFinalizerName("not a finalizer")); err == nil ||
		!strings.Contains(err.Error(), "WithFinalizerName") {
		t.Fatalf("invalid finalizer name accepted: %v", err)
	}
	if _, err := NewProvisionController(f.client, testProvisioner, f.store, WithLeaseName("Not_A_Lease")); err == nil ||
		!strings.Contains(err.Error(), "WithLeaseName") {
		t.Fatalf("invalid Lease name accepted: %v", err)
	}
}
