// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

// TestExpand raises the request of a claim the real binary provisioned:
// kube-controller-manager hands the claim over (ExternalExpanding), the
// provisioner resizes it as the CSI external-resizer would, and the user
// sees the new size on the PV and the claim, the resize's state cleared,
// and the events.
func TestExpand(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	e := setup(t, "expand", func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = ptr.To(true) })
	startProvisioner(t, e.env(), e.args(node)...)
	e.createPVC(t, "grow", nil)
	pv := bound(ctx, t, e.ns, "grow")

	claim := expandClaim(ctx, t, e.ns, "grow", "3Gi")
	for _, reason := range []string{"ExternalExpanding", "Resizing", "VolumeResizeSuccessful"} {
		ev, err := framework.WaitForEvent(ctx, cp.Client, claim, reason)
		if err != nil {
			t.Fatal(err)
		}
		if reason != "ExternalExpanding" && (ev.Source.Component != e.provisioner || ev.ReportingController != e.provisioner || ev.Type != corev1.EventTypeNormal) {
			t.Errorf("event %s: type %s, source %q, reportingController %q; want Normal from %s", reason, ev.Type, ev.Source.Component, ev.ReportingController, e.provisioner)
		}
	}
	if events, err := framework.ListEvents(ctx, cp.Client, claim); err != nil {
		t.Error(err)
	} else {
		for _, ev := range events {
			if ev.Type == corev1.EventTypeWarning {
				t.Errorf("Warning event %s: %s", ev.Reason, ev.Message)
			}
		}
	}
	// The directory is the same one: a resize moves nothing.
	checkVolume(t, volume(ctx, t, pv.Name), e.pvDir, node)
}

// expandClaim raises the claim's request to size, waits for the resize to
// finish and checks what the user sees: the PV's capacity and the claim's
// status.capacity at size, no resize state or condition left.
func expandClaim(ctx context.Context, t *testing.T, ns, name, size string) *corev1.PersistentVolumeClaim {
	t.Helper()
	want := resource.MustParse(size)
	patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
	// The resize admission reads the class from its informer: a class
	// changed just now may not be there yet.
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, lastErr = cp.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("raising the request of %s/%s to %s: %v", ns, name, size, lastErr)
	}
	var claim *corev1.PersistentVolumeClaim
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		claim, err = cp.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got := claim.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(want) == 0, nil
	})
	if err != nil {
		t.Fatalf("claim %s/%s: status.capacity not %s: %v (status %+v)", ns, name, size, err, claim.Status)
	}
	pv := volume(ctx, t, claim.Spec.VolumeName)
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(want) != 0 {
		t.Errorf("PV %s: capacity %s, want %s", pv.Name, got.String(), size)
	}
	if s, ok := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok {
		t.Errorf("claim %s/%s: allocatedResourceStatuses[storage] = %s after the resize, want none", ns, name, s)
	}
	if got := claim.Status.AllocatedResources[corev1.ResourceStorage]; got.Cmp(want) != 0 {
		t.Errorf("claim %s/%s: allocatedResources[storage] %s, want %s", ns, name, got.String(), size)
	}
	for _, c := range claim.Status.Conditions {
		switch c.Type {
		case corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimFileSystemResizePending:
			t.Errorf("claim %s/%s: condition %s left after the resize: %s", ns, name, c.Type, c.Message)
		}
	}
	return claim
}

func volume(ctx context.Context, t *testing.T, name string) *corev1.PersistentVolume {
	t.Helper()
	pv, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// allowExpansion sets allowVolumeExpansion on a class.
func allowExpansion(ctx context.Context, t *testing.T, class string) {
	t.Helper()
	if _, err := cp.Client.StorageV1().StorageClasses().Patch(ctx, class, types.MergePatchType, []byte(`{"allowVolumeExpansion":true}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestExpandBeyondBudget: a claim asking to grow past its path's budget
// gets a VolumeResizeFailed Warning with the numbers and the resize status
// Kubernetes expects (ControllerResizeInfeasible, the PV untouched); the
// user lowers the request to what fits and the volume grows to it; the
// grown volume counts against the budget.
func TestExpandBeyondBudget(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	e := setup(t, "expand-budget", func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = ptr.To(true) })
	startProvisioner(t, e.env(), e.args(node, "--config="+budgetConfig(t, e.pvDir, "3Gi"))...)
	e.createPVC(t, "a", nil)
	e.createPVC(t, "b", nil)
	pv := bound(ctx, t, e.ns, "a")
	bound(ctx, t, e.ns, "b")

	patch := `{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}`
	if _, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "a"}}
	waitForWarning(ctx, t, claim, fmt.Sprintf("no room on node %s to grow %s to 3Gi: %s has 2Gi left of 3Gi (its capacity in the configuration), besides this volume", node, pv.Name, e.pvDir))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, "a", metav1.GetOptions{})
		return err == nil && c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible, nil
	})
	if err != nil {
		t.Errorf("claim a: resize status not %s", corev1.PersistentVolumeClaimControllerResizeInfeasible)
	}
	if got := volume(ctx, t, pv.Name).Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("PV %s: capacity %s after a refused resize, want 1Gi", pv.Name, got.String())
	}

	// Lowered to what fits, as RecoverVolumeExpansionFailure allows.
	expandClaim(ctx, t, e.ns, "a", "2Gi")
	c := e.createPVC(t, "c", nil)
	waitForWarning(ctx, t, c, fmt.Sprintf("no room on node %s for a request of 1Gi: %s has 0 left of 3Gi", node, e.pvDir))
}
