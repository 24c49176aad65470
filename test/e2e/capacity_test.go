// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

// TestHostpathCapacityScheduling follows the README's "Scheduling by
// capacity" on two real nodes with kube-scheduler: deploy/local-path-config
// (the DaemonSet reading config.json) with the component
// deploy/components/capacity (provisioner hostpath.kubeprov.io,
// --enable-capacity, the CSIDriver), node A's path budgeted 1Gi and node
// B's 10Gi. A pod whose 2Gi claim prefers node A (preferred node affinity,
// weight 100) lands on node B at the first try: the scheduler reads the
// published room, so the claim never goes to A and back (no Warning on the
// claim, one Scheduled event, naming B).
func TestHostpathCapacityScheduling(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	if len(c.Nodes) < 2 {
		t.Fatalf("the cluster has %d node(s), this test needs 2", len(c.Nodes))
	}
	full, roomy := c.Nodes[0], c.Nodes[1]
	const class = "hostpath" // deploy/node-local's, WaitForFirstConsumer
	config := fmt.Sprintf(`{"nodePathMap":[{"node":%q,"paths":[%q],"pathCapacity":{%[2]q:"1Gi"}},{"node":%q,"paths":[%[2]q],"pathCapacity":{%[2]q:"10Gi"}}]}`,
		full.Name, hostpathDir, roomy.Name)
	installLocalPathConfig(ctx, t, config, []string{"hostpath/deploy/components/capacity"})
	// What the scheduler will read: each node's instance publishes its
	// node's room.
	waitForPublishedRoom(ctx, t, class, map[string]string{full.Name: "1Gi", roomy.Name: "10Gi"})

	ns := c.CreateTestNamespace(t, "capacity")
	const name = "big"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, class, "2Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := writerPod(name, c.Image(cluster.BusyboxImage))
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{full.Name},
			}}},
		}},
	}}
	if err := c.RunPod(ctx, ns, pod); err != nil {
		t.Fatal(err)
	}
	ran, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ran.Spec.NodeName != roomy.Name {
		t.Errorf("pod ran on %s, want %s: %s has 1Gi of room, the claim asks 2Gi", ran.Spec.NodeName, roomy.Name, full.Name)
	}
	claim, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := claim.Annotations["volume.kubernetes.io/selected-node"]; got != roomy.Name {
		t.Errorf("claim's selected node %q, want %s", got, roomy.Name)
	}
	checkFirstTry(ctx, t, claim, ran, roomy.Name)
	log, err := c.PodLog(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	checkWrittenOnNode(ctx, t, roomy, pv.Spec.HostPath.Path, log)
	// The volume took 2Gi of B's room.
	waitForPublishedRoom(ctx, t, class, map[string]string{full.Name: "1Gi", roomy.Name: "8Gi"})

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	checkGoneFromNode(ctx, t, roomy, hostpathDir, pv.Name)
}

// waitForPublishedRoom waits until the provisioner's CSIStorageCapacity
// objects for class say, per node (by its kubernetes.io/hostname), the
// maximumVolumeSize in want.
func waitForPublishedRoom(ctx context.Context, t *testing.T, class string, want map[string]string) {
	t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.StorageV1().CSIStorageCapacities(hostpathNS).List(ctx, metav1.ListOptions{LabelSelector: "hostpath.kubeprov.io/provisioner=hostpath.kubeprov.io"})
		if err != nil {
			return false, nil
		}
		got = publishedRoom(list.Items, class)
		for node, size := range want {
			if got[node] != size {
				return false, nil
			}
		}
		return len(got) == len(want), nil
	})
	if err != nil {
		t.Fatalf("published room of class %s per node: %v, want %v: %v", class, got, want, err)
	}
}

// publishedRoom is each object's maximumVolumeSize by its node.
func publishedRoom(objs []storagev1.CSIStorageCapacity, class string) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		if o.StorageClassName != class || o.NodeTopology == nil || o.MaximumVolumeSize == nil {
			continue
		}
		out[o.NodeTopology.MatchLabels[corev1.LabelHostname]] = o.MaximumVolumeSize.String()
	}
	return out
}

// checkFirstTry: the claim went to node at the first try: no Warning on it
// (a node without room would have sent it back with ProvisioningFailed),
// and the pod was scheduled once, to node.
func checkFirstTry(ctx context.Context, t *testing.T, claim *corev1.PersistentVolumeClaim, pod *corev1.Pod, node string) {
	t.Helper()
	events, err := framework.ListEvents(ctx, c.Client, claim)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Type == corev1.EventTypeWarning {
			t.Errorf("claim %s has a Warning %s: %s", claim.Name, ev.Reason, ev.Message)
		}
	}
	if events, err = framework.ListEvents(ctx, c.Client, pod); err != nil {
		t.Fatal(err)
	}
	var scheduled []string
	for _, ev := range events {
		if ev.Reason == "Scheduled" {
			scheduled = append(scheduled, ev.Message)
		}
	}
	if len(scheduled) != 1 || !strings.HasSuffix(scheduled[0], " to "+node) {
		t.Errorf("pod %s: Scheduled events %q, want one, to %s", pod.Name, scheduled, node)
	}
}
