// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// What the scheduler sets on WaitForFirstConsumer claims; no scheduler runs
// here, so the test plays its part.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// TestNodeLocal runs two --node-local instances, as a DaemonSet on two nodes
// would: each provisions only the claims scheduled to its node, in its own
// directory, with its own journal, and leaves the other node's volumes alone
// even when that node's instance is down.
func TestNodeLocal(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	e := setup(t, "nodelocal", func(sc *storagev1.StorageClass) {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	nodes := []string{"node-a", "node-b"}
	dirs := map[string]string{}
	procs := map[string]*framework.Process{}
	start := func(node string) {
		procs[node] = startProvisioner(t, e.env(), e.args(node, "--node-local", "--pv-dir="+dirs[node])...)
	}
	for _, node := range nodes {
		dirs[node] = newPVDir(t)
		start(node)
	}

	pvs := map[string]*corev1.PersistentVolume{}
	for _, node := range nodes {
		e.createPVC(t, "claim-"+node, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations = map[string]string{annSelectedNode: node}
		})
	}
	for _, node := range nodes {
		pvs[node] = bound(ctx, t, e.ns, "claim-"+node)
		checkVolume(t, pvs[node], dirs[node], node)
		if got := entries(t, dirs[node]); !slices.Equal(got, []string{pvs[node].Name}) {
			t.Errorf("%s's directory holds %v, want only %s", node, got, pvs[node].Name)
		}
	}
	// Each instance recorded its operations in a journal of its own.
	cms, err := cp.Client.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		if !slices.ContainsFunc(cms.Items, func(cm corev1.ConfigMap) bool { return cm.Name == controller.JournalName(e.provisioner, node) }) {
			t.Errorf("no in-flight journal of %s among the ConfigMaps of %s", node, e.ns)
		}
	}

	// node-a's instance is down when its volume is released: node-b's
	// instance must not touch it.
	if err := procs["node-a"].Stop(); err != nil {
		t.Fatal(err)
	}
	pvA := pvs["node-a"]
	deletePVC(t, e.ns, "claim-node-a")
	if _, err := framework.WaitForPVPhase(ctx, cp.Client, pvA.Name, corev1.VolumeReleased); err != nil {
		t.Fatal(err)
	}
	if err := procs["node-b"].WaitForLog(ctx, "does not own this volume", pvA.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, pvA.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("node-b's instance deleted node-a's PV: %v", err)
	}
	if got := entries(t, dirs["node-a"]); !slices.Equal(got, []string{pvA.Name}) {
		t.Errorf("node-a's directory holds %v, want %s still", got, pvA.Name)
	}

	// Back up, node-a's instance deletes its volume; node-b deletes its own.
	start("node-a")
	deletePVC(t, e.ns, "claim-node-b")
	for _, node := range nodes {
		if err := framework.WaitForPVDeleted(ctx, cp.Client, pvs[node].Name); err != nil {
			t.Fatal(err)
		}
		if got := entries(t, dirs[node]); len(got) != 0 {
			t.Errorf("%s's directory holds %v after its PV was deleted", node, got)
		}
	}
}
