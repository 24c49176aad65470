// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
)

// These tests check the control plane itself: that the real
// kube-controller-manager does what provisioner tests rely on.

const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// createStorageClass creates a StorageClass named after the test's namespace
// (StorageClasses are cluster-scoped) and deletes it when the test ends.
func createStorageClass(t *testing.T, ns, provisioner string) *storagev1.StorageClass {
	t.Helper()
	return cp.CreateTestStorageClass(t, framework.NewStorageClass(ns, provisioner, nil))
}

func createPVC(t *testing.T, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(t.Context(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

func TestControllerManagerSetsStorageProvisioner(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	ns := cp.CreateTestNamespace(t, "annotation")
	sc := createStorageClass(t, ns, "example.com/annotation-test")
	pvc := createPVC(t, framework.NewPVC(ns, "claim", sc.Name, "1Gi"))

	start := time.Now()
	got, err := framework.WaitForPVCAnnotation(ctx, cp.Client, ns, pvc.Name, framework.AnnStorageProvisioner)
	if err != nil {
		t.Fatal(err)
	}
	if got != sc.Provisioner {
		t.Errorf("%s = %q, want %q", framework.AnnStorageProvisioner, got, sc.Provisioner)
	}
	t.Logf("annotation set after %s", time.Since(start).Round(time.Millisecond))

	// The PV controller also tells the user it waits for the external provisioner.
	ev, err := framework.WaitForEvent(ctx, cp.Client, pvc, "ExternalProvisioning")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("event: %s %s: %s", ev.Type, ev.Reason, ev.Message)

	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVCDeleted(ctx, cp.Client, ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
}

func TestDeletedPVCGoesAway(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	ns := cp.CreateTestNamespace(t, "deletion")
	pvc := createPVC(t, framework.NewPVC(ns, "claim", "", "1Gi"))
	// The apiserver's StorageObjectInUseProtection admission plugin adds the
	// finalizer; only the pvc-protection controller removes it.
	if !slices.Contains(pvc.Finalizers, pvcProtectionFinalizer) {
		t.Fatalf("new PVC has finalizers %v, want %s", pvc.Finalizers, pvcProtectionFinalizer)
	}

	start := time.Now()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVCDeleted(ctx, cp.Client, ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("PVC gone %s after Delete", time.Since(start).Round(time.Millisecond))
}

func TestRestartAPIServer(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	ns := cp.CreateTestNamespace(t, "restart")
	client := cp.Client // the clientset from before the restart must keep working
	host := cp.Config.Host

	start := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %s", time.Since(start).Round(time.Millisecond))
	if cp.Config.Host != host {
		t.Errorf("apiserver moved from %s to %s", host, cp.Config.Host)
	}

	// Data in etcd survived, and the old clientset reaches the new apiserver.
	if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("reading namespace %s after the restart: %v", ns, err)
	}

	// kube-controller-manager reconnected: it handles a new PVC.
	sc := createStorageClass(t, ns, "example.com/restart-test")
	pvc := createPVC(t, framework.NewPVC(ns, "claim", sc.Name, "1Gi"))
	start = time.Now()
	if got, err := framework.WaitForPVCAnnotation(ctx, client, ns, pvc.Name, framework.AnnStorageProvisioner); err != nil || got != sc.Provisioner {
		t.Fatalf("kube-controller-manager after the restart: got %q, %v; want %q", got, err, sc.Provisioner)
	}
	t.Logf("kube-controller-manager handled a new PVC %s after the restart", time.Since(start).Round(time.Millisecond))
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVCDeleted(ctx, client, ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
}

func TestPreBoundPVBinds(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	ns := cp.CreateTestNamespace(t, "prebound")
	pv := framework.NewPV(ns+"-pv", "", "1Gi")
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "claim"}
	pv, err := cp.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		_ = cp.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
		if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	createPVC(t, framework.NewPVC(ns, "claim", "", "1Gi"))

	start := time.Now()
	gotPVC, gotPV, err := framework.WaitForPVCBound(ctx, cp.Client, ns, "claim")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bound after %s", time.Since(start).Round(time.Millisecond))
	if gotPVC.Spec.VolumeName != pv.Name || gotPV.Spec.ClaimRef.UID != gotPVC.UID || gotPV.Status.Phase != corev1.VolumeBound {
		t.Errorf("PVC volumeName %q, PV claimRef %+v phase %s; want %s bound to the PVC (uid %s)",
			gotPVC.Spec.VolumeName, gotPV.Spec.ClaimRef, gotPV.Status.Phase, pv.Name, gotPVC.UID)
	}

	// Deleting the claim releases the Retain PV.
	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "claim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitForPVPhase(ctx, cp.Client, pv.Name, corev1.VolumeReleased); err != nil {
		t.Fatal(err)
	}
}
