// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/kubeletsim"
)

// Nodes of TestHelperPodsFairness besides kubeletsim's helperNode.
const (
	// ghostNode does not exist.
	ghostNode = "ghost-node"
	// stuckNode is Ready, but no kubelet ever runs its pods.
	stuckNode = "stuck-node"
	// controlPlaneNode carries the control-plane taint.
	controlPlaneNode = "control-plane-node"

	labelHelperClaimNamespace = "hostpath.kubeprov.io/claim-namespace"
	// fairnessBound is how long tenant B's claims may take, whatever
	// tenant A's do: a few helper pods run by kubeletsim, with retries
	// of at most 2s (startProvisioner), on a loaded machine (measured:
	// under 1s on an idle one). Before, B waited for --helper-timeout (2m).
	fairnessBound = 10 * time.Second
)

// TestHelperPodsFairness: tenant A's claims point (through the
// selected-node annotation, which a claim's owner can write) at a node that
// does not exist, at a node that never runs pods and at a control-plane
// node. They must not delay tenant B's claims on a working node: B's claims
// are Bound within fairnessBound while A's stay Pending with Warning events
// naming the node, its taint or the namespace's helper pod bound, and A
// never has more than --helper-pods-per-namespace helper pods. Before, each
// of A's claims held one of the 4 workers for the whole --helper-timeout
// (2 minutes), and B waited for them.
func TestHelperPodsFairness(t *testing.T) {
	ctx := framework.TestContext(t, 4*time.Minute)
	e := setup(t, "fair", nil)
	nsA := cp.CreateTestNamespace(t, "hostpath-fair-a")
	nsB := cp.CreateTestNamespace(t, "hostpath-fair-b")
	const image = "hostpath-helper:fairness"
	startHelperSim(t, ctx, map[string]kubeletsim.Image{image: {Command: []string{binary(t)}}})
	createNode(ctx, t, stuckNode, nil)
	createNode(ctx, t, controlPlaneNode, []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}})
	t.Cleanup(func() {
		// No kubelet ends the stuck node's pods: delete them at once.
		_ = cp.Client.CoreV1().Pods(e.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: labelManagedBy + "=" + helperManagedBy})
	})
	// The bound through the environment, which every flag also reads. The
	// API budget is raised: with retries of at most 2s (startProvisioner)
	// A's nine claims would otherwise spend the default 5 queries per
	// second on their retries alone, which is the workers' and the API
	// budget's fairness, not the helper pods'.
	env := append(e.env(), "HELPER_PODS_PER_NAMESPACE=2")
	startProvisioner(t, env, e.args(controllerNode, "--helper-pods", "--helper-image="+image, "--worker-threads=4",
		"--kube-api-qps=50", "--kube-api-burst=100")...)

	onNode := func(node string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Annotations = map[string]string{annSelectedNode: node} }
	}
	var ghosts, stuck, tainted []*corev1.PersistentVolumeClaim
	for i := range 4 {
		ghosts = append(ghosts, createClaim(t, e, nsA, fmt.Sprintf("ghost-%d", i), onNode(ghostNode)))
		stuck = append(stuck, createClaim(t, e, nsA, fmt.Sprintf("stuck-%d", i), onNode(stuckNode)))
	}
	tainted = append(tainted, createClaim(t, e, nsA, "control-plane", onNode(controlPlaneNode)))
	// A's claims are taken first: a helper pod on the stuck node shows it.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + stuckNode})
		return err == nil && len(pods.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("no helper pod for tenant A's claims on %s: %v", stuckNode, err)
	}

	start := time.Now()
	var claimsB []*corev1.PersistentVolumeClaim
	for i := range 3 {
		claimsB = append(claimsB, createClaim(t, e, nsB, fmt.Sprintf("b-%d", i), onNode(helperNode)))
	}
	bctx, cancel := context.WithTimeout(ctx, fairnessBound)
	defer cancel()
	for _, c := range claimsB {
		if _, _, err := framework.WaitForPVCBound(bctx, cp.Client, c.Namespace, c.Name); err != nil {
			t.Fatalf("tenant B's claim %s is not Bound within %s while tenant A's claims wait for bad nodes: %v", c.Name, fairnessBound, err)
		}
	}
	t.Logf("tenant B's %d claims Bound in %s", len(claimsB), time.Since(start).Round(time.Millisecond))

	for _, c := range ghosts {
		waitForWarning(ctx, t, c, "no helper pod: node "+ghostNode+" does not exist")
	}
	waitForWarning(ctx, t, tainted[0], "helper pods may not run on node "+controlPlaneNode+
		": its taint node-role.kubernetes.io/control-plane:NoSchedule is not tolerated")
	running := "on node " + stuckNode + ") has not ended yet"
	full := "namespace " + nsA + " already has 2 helper pods (--helper-pods-per-namespace 2)"
	busy := 0
	for _, c := range stuck {
		if waitForWarning(ctx, t, c, running, full) == full {
			busy++
		}
	}
	if busy != 2 {
		t.Errorf("%d of tenant A's 4 claims on %s were told the namespace has its 2 helper pods; want 2", busy, stuckNode)
	}
	for _, c := range slices.Concat(ghosts, stuck, tainted) {
		got, err := cp.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.ClaimPending {
			t.Errorf("tenant A's claim %s is %s, want Pending", c.Name, got.Status.Phase)
		}
	}
	pods, err := cp.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelHelperClaimNamespace + "=" + nsA})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("tenant A has %d helper pods, want --helper-pods-per-namespace 2", len(pods.Items))
	}
	controlPlane := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	for _, p := range pods.Items {
		if p.Spec.NodeName != stuckNode {
			t.Errorf("helper pod %s on %s, want only the stuck node's", p.Name, p.Spec.NodeName)
		}
		// Only the API server's defaults (DefaultTolerationSeconds).
		for _, tol := range p.Spec.Tolerations {
			if tol.ToleratesTaint(klog.Background(), &controlPlane, false) || tol.TolerationSeconds == nil {
				t.Errorf("helper pod %s tolerates %+v: want no toleration of its own", p.Name, tol)
			}
		}
	}
}

func createClaim(t *testing.T, e *testEnv, ns, name string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	t.Helper()
	c := framework.NewPVC(ns, name, e.class.Name, "1Mi")
	mutate(c)
	c, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createNode creates a Ready node no kubelet runs, with taints.
func createNode(ctx context.Context, t *testing.T, name string, taints []corev1.Taint) {
	t.Helper()
	node, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{Taints: taints},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitForWarning waits for a Warning event on c whose message contains one
// of wants, and returns that one.
func waitForWarning(ctx context.Context, t *testing.T, c *corev1.PersistentVolumeClaim, wants ...string) string {
	t.Helper()
	var found string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, want := range wants {
			if hasWarning(ctx, t, c, want) {
				found = want
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		events, _ := framework.ListEvents(ctx, cp.Client, c)
		var msgs []string
		for _, ev := range events {
			msgs = append(msgs, ev.Type+" "+ev.Message)
		}
		t.Fatalf("claim %s/%s: no Warning event saying %q; events: %s", c.Namespace, c.Name, wants, strings.Join(msgs, " | "))
	}
	return found
}

func hasWarning(ctx context.Context, t *testing.T, c *corev1.PersistentVolumeClaim, want string) bool {
	t.Helper()
	events, err := framework.ListEvents(ctx, cp.Client, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, want) {
			return true
		}
	}
	return false
}
