// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// These tests run the helpers against a fake clientset; the control plane tests
// exercise them against the real thing.

func testContext(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func boundPair(ns, pvcName, pvName string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvc := NewPVC(ns, pvcName, "", "1Gi")
	pvc.UID = types.UID("uid-" + pvcName)
	pvc.Spec.VolumeName = pvName
	pvc.Status.Phase = corev1.ClaimBound
	pv := NewPV(pvName, "", "1Gi")
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: pvcName, UID: pvc.UID}
	pv.Status.Phase = corev1.VolumeBound
	return pvc, pv
}

func TestWaitForPVCBoundAlreadyBound(t *testing.T) {
	pvc, pv := boundPair("ns", "claim", "pv-1")
	c := fake.NewClientset(pvc, pv, NewPVC("ns", "other", "", "1Gi"))
	gotPVC, gotPV, err := WaitForPVCBound(testContext(t, 10*time.Second), c, "ns", "claim")
	if err != nil {
		t.Fatalf("WaitForPVCBound: %v", err)
	}
	if gotPVC.Name != "claim" || gotPV.Name != "pv-1" {
		t.Errorf("got PVC %q and PV %q, want claim and pv-1", gotPVC.Name, gotPV.Name)
	}
}

func TestWaitForPVCBoundSeesLaterUpdate(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	boundPVC, pv := boundPair("ns", "claim", "pv-1")
	pending := NewPVC("ns", "claim", "", "1Gi")
	pending.UID = boundPVC.UID
	pending.Status.Phase = corev1.ClaimPending
	c := fake.NewClientset(pending)

	type result struct {
		pvc *corev1.PersistentVolumeClaim
		err error
	}
	done := make(chan result, 1)
	go func() {
		pvc, _, err := WaitForPVCBound(ctx, c, "ns", "claim")
		done <- result{pvc, err}
	}()
	// Whether the wait lists before or after these writes, it must see the end state.
	if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().PersistentVolumeClaims("ns").Update(ctx, boundPVC, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("WaitForPVCBound: %v", r.err)
	}
	if r.pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("phase %q, want Bound", r.pvc.Status.Phase)
	}
}

func TestWaitForPVCBoundTimeoutShowsState(t *testing.T) {
	pvc := NewPVC("ns", "claim", "slow", "1Gi")
	pvc.UID = "uid-claim"
	pvc.Status.Phase = corev1.ClaimPending
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: "claim.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "claim", UID: pvc.UID},
		Type:           corev1.EventTypeWarning,
		Reason:         "ProvisioningFailed",
		Message:        "no space left",
		Count:          3,
	}
	c := fake.NewClientset(pvc, ev)

	_, _, err := WaitForPVCBound(testContext(t, 300*time.Millisecond), c, "ns", "claim")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want an error wrapping context.DeadlineExceeded", err)
	}
	for _, want := range []string{"PVC ns/claim to be Bound", "phase: Pending", "storageClassName: slow", "Warning ProvisioningFailed (x3", "no space left"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestWaitForPVCAnnotation(t *testing.T) {
	pvc := NewPVC("ns", "claim", "gold", "1Gi")
	pvc.Annotations = map[string]string{AnnStorageProvisioner: "example.com/nfs"}
	c := fake.NewClientset(pvc)
	got, err := WaitForPVCAnnotation(testContext(t, 10*time.Second), c, "ns", "claim", AnnStorageProvisioner)
	if err != nil || got != "example.com/nfs" {
		t.Fatalf("got %q, %v; want example.com/nfs", got, err)
	}
}

func TestWaitForDeleted(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	c := fake.NewClientset(NewPVC("ns", "claim", "", "1Gi"), NewPV("pv-1", "", "1Gi"))

	if err := WaitForPVCDeleted(ctx, c, "ns", "missing"); err != nil {
		t.Errorf("WaitForPVCDeleted of a missing PVC: %v", err)
	}
	if err := WaitForPVDeleted(ctx, c, "missing"); err != nil {
		t.Errorf("WaitForPVDeleted of a missing PV: %v", err)
	}

	done := make(chan error, 2)
	go func() { done <- WaitForPVCDeleted(ctx, c, "ns", "claim") }()
	go func() { done <- WaitForPVDeleted(ctx, c, "pv-1") }()
	if err := c.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "claim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().PersistentVolumes().Delete(ctx, "pv-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestWaitForPVPhaseTimeout(t *testing.T) {
	pv := NewPV("pv-1", "", "1Gi")
	pv.Status.Phase = corev1.VolumeAvailable
	c := fake.NewClientset(pv)
	_, err := WaitForPVPhase(testContext(t, 300*time.Millisecond), c, "pv-1", corev1.VolumeReleased)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "phase: Available") {
		t.Fatalf("got %v, want a timeout that shows phase Available", err)
	}
}

func TestEvents(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	pvc := NewPVC("ns", "claim", "", "1Gi")
	pvc.UID = "uid-claim"
	pv := NewPV("pv-1", "", "1Gi")
	pv.UID = "uid-pv"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	event := func(name, reason string, involved corev1.ObjectReference, at time.Time) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: involved.Namespace, Name: name},
			InvolvedObject: involved,
			Reason:         reason,
			LastTimestamp:  metav1.NewTime(at),
		}
	}
	pvcRef := corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "claim", UID: pvc.UID}
	c := fake.NewClientset(
		event("late", "ProvisioningSucceeded", pvcRef, t0.Add(time.Minute)),
		event("early", "Provisioning", pvcRef, t0),
		event("other", "Provisioning", corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "claim", UID: "older-claim"}, t0),
		// Events about cluster-scoped objects are in "default".
		event("pv", "VolumeFailedDelete", corev1.ObjectReference{Kind: "PersistentVolume", Namespace: "default", Name: "pv-1", UID: pv.UID}, t0),
	)

	events, err := ListEvents(ctx, c, pvc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range events {
		names = append(names, ev.Name)
	}
	if got := strings.Join(names, ","); got != "early,late" {
		t.Errorf("ListEvents = %s, want early,late (same UID only, oldest first)", got)
	}

	if ev, err := WaitForEvent(ctx, c, pv, "VolumeFailedDelete"); err != nil || ev.Name != "pv" {
		t.Errorf("WaitForEvent on PV = %v, %v; want event pv", ev, err)
	}

	// Without a UID (an object built locally) kind, namespace and name match, and a
	// later event is seen through the watch.
	done := make(chan error, 1)
	go func() {
		_, err := WaitForEvent(ctx, c, NewPVC("ns", "claim", "", "1Gi"), "ExternalProvisioning")
		done <- err
	}()
	if _, err := c.CoreV1().Events("ns").Create(ctx, event("new", "ExternalProvisioning", pvcRef, t0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("WaitForEvent by name: %v", err)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := WaitForEvent(short, c, pvc, "NeverHappens"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "event NeverHappens about PersistentVolumeClaim ns/claim") {
		t.Errorf("got %v, want a timeout naming the event", err)
	}
}

func TestFindRepoRoot(t *testing.T) {
	root, err := findRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, controlPlaneScript)); err != nil {
		t.Errorf("findRepoRoot = %s, which has no %s: %v", root, controlPlaneScript, err)
	}

	t.Chdir(t.TempDir())
	if _, err := findRepoRoot(); err == nil || !strings.Contains(err.Error(), "run from inside the repository") {
		t.Errorf("outside the repository: got %v", err)
	}
}
