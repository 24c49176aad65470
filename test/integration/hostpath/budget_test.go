// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

// budgetConfig gives node one path, dir, with a budget.
func budgetConfig(t *testing.T, dir, capacity string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, fmt.Sprintf(`{"nodePathMap":[{"node":%q,"paths":[%q],"pathCapacity":{%[2]q:%q}}]}`, node, dir, capacity))
	return config
}

// TestBudget: a burst of claims against a path's budget binds exactly as
// many as fit; the others get a Warning naming the node, the path and the
// numbers; the gauges show the budget; a restarted provisioner counts the
// room from the PVs; a deleted volume gives its room back; and a
// WaitForFirstConsumer claim that does not fit goes back to the scheduler.
func TestBudget(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	e := setup(t, "budget", nil)
	config := budgetConfig(t, e.pvDir, "3Gi")
	args := e.args(node, "--config="+config)
	p := startProvisioner(t, e.env(), args...)

	names := []string{"c0", "c1", "c2", "c3", "c4"}
	for _, name := range names {
		e.createPVC(t, name, nil) // 1Gi each
	}
	full := fmt.Sprintf("no room on node %s for a request of 1Gi: %s has 0 left of 3Gi (its capacity in the configuration)", node, e.pvDir)
	bound, waiting := settleBurst(ctx, t, e, names, full)
	if len(bound) != 3 || len(waiting) != 2 {
		t.Fatalf("bound %v, waiting %v: want 3 of 1Gi in 3Gi bound, 2 waiting", bound, waiting)
	}
	if got := entries(t, e.pvDir); len(got) != 3 {
		t.Errorf("%s holds %v, want 3 volumes", e.pvDir, got)
	}
	checkBudgetGauges(t, p, e.pvDir, 3<<30, 3<<30)

	// A restart knows what the PVs hold: the waiting claims stay waiting.
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	p = startProvisioner(t, e.env(), args...)
	if err := p.WaitForLog(ctx, "no room on node "+node); err != nil {
		t.Fatal(err)
	}
	if got := volumesOfClass(ctx, t, e.class.Name); len(got) != 3 {
		t.Fatalf("after a restart %d PVs, want still 3", len(got))
	}

	// A deleted volume's room goes to one waiting claim, not both.
	deletePVC(t, e.ns, bound[0])
	pending := waiting
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pending = slices.DeleteFunc(slices.Clone(waiting), func(name string) bool { return phase(ctx, t, e.ns, name) == corev1.ClaimBound })
		return len(pending) == 1, nil
	})
	if err != nil {
		t.Fatalf("after deleting %s, waiting claims %v, want one of %v bound", bound[0], pending, waiting)
	}
	if got := volumesOfClass(ctx, t, e.class.Name); len(got) != 3 {
		t.Errorf("%d PVs, want 3: the freed 1Gi taken once", len(got))
	}
	checkBudgetGauges(t, p, e.pvDir, 3<<30, 3<<30)

	// WaitForFirstConsumer: the scheduler's node has no room, so the claim
	// goes back to the scheduler.
	wffc := framework.NewStorageClass(e.ns+"-wffc", e.provisioner, nil)
	wffc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	wffc = cp.CreateTestStorageClass(t, wffc)
	claim := e.createPVC(t, "late", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = &wffc.Name })
	selectNode(ctx, t, e.ns, claim.Name, node)
	waitForWarning(ctx, t, claim, "asking the scheduler for another node: "+full+"; the claim goes back to the scheduler")
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, claim.Name, metav1.GetOptions{})
		_, selected := c.Annotations[annSelectedNode]
		return err == nil && !selected, nil
	}); err != nil {
		t.Errorf("claim %s still has %s: not given back to the scheduler", claim.Name, annSelectedNode)
	}
}

// settleBurst waits until each claim of names is Bound or has a Warning
// containing refused, and returns those of each kind.
func settleBurst(ctx context.Context, t *testing.T, e *testEnv, names []string, refused string) (bound, waiting []string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		bound, waiting = nil, nil
		for _, name := range names {
			switch {
			case phase(ctx, t, e.ns, name) == corev1.ClaimBound:
				bound = append(bound, name)
			case hasWarning(ctx, t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}, refused):
				waiting = append(waiting, name)
			}
		}
		return len(bound)+len(waiting) == len(names), nil
	})
	if err != nil {
		t.Fatalf("claims not settled: bound %v, refused %v, of %v (want each bound or with a Warning %q)", bound, waiting, names, refused)
	}
	return bound, waiting
}

func phase(ctx context.Context, t *testing.T, ns, name string) corev1.PersistentVolumeClaimPhase {
	t.Helper()
	c, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Status.Phase
}

// checkBudgetGauges checks what the provisioner's /metrics says of dir.
func checkBudgetGauges(t *testing.T, p *framework.Process, dir string, capacity, allocated float64) {
	t.Helper()
	families, err := framework.ScrapeMetrics("http://" + p.Endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"node": node, "path": dir}
	for name, want := range map[string]float64{"hostpath_path_capacity_bytes": capacity, "hostpath_path_allocated_bytes": allocated} {
		if got, err := framework.MetricValue(families, name, labels); err != nil || got != want {
			t.Errorf("%s%v = %v (%v), want %v", name, labels, got, err, want)
		}
	}
}
