// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

const annSelectedNode = "volume.kubernetes.io/selected-node"

// TestNodeDeployment: two instances with --node-deployment, one per node,
// share the driver's claims: a claim selected for a node is provisioned by
// that node's instance, an Immediate claim by whichever instance selects its
// node first, each exactly once; each volume is deleted once, by its node's
// instance.
func TestNodeDeployment(t *testing.T) {
	// No GET_CAPACITY: every node has room as far as the instances know
	// (TestNodeDeploymentCapacity checks the capacity check).
	e := newEnv(t, anyDriver, csidriver.Options{Topology: true, ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	}})
	zoneA, zoneB := uniqueName("zone-a"), uniqueName("zone-b")
	nodes := map[string]string{} // node -> zone
	nodeA := e.createNode(zoneA, true)
	nodeB := e.createNode(zoneB, true)
	nodes[nodeA], nodes[nodeB] = zoneA, zoneB
	// Both run with exactly the permissions csi/deploy grants.
	user, home, kubeconfig := e.deployUser()
	instances := map[string]*framework.Process{}
	for _, node := range []string{nodeA, nodeB} {
		instances[node] = e.startReplica(backend.Replica{
			Env: []string{"NODE_NAME=" + node},
			Args: []string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + home, "--node-deployment",
				"--node-deployment-base-delay=1s", "--node-deployment-max-delay=2s"},
		})
	}
	for _, p := range instances {
		if err := p.WaitReady(e.ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	// provisionedBy checks that the claim's volume was created once, by
	// the instance of node, with node affinity to that node's zone.
	provisionedBy := func(t *testing.T, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, node string) {
		t.Helper()
		var creates int
		for _, r := range e.driver.CreateRequests() {
			if r.GetName() == pv.Name {
				creates++
			}
		}
		if creates != 1 {
			t.Errorf("CreateVolume %s called %d times, want once", pv.Name, creates)
		}
		if got := affinityZones(pv); !slices.Equal(got, []string{nodes[node]}) {
			t.Errorf("PV node affinity zones %v, want %s's zone %s", got, node, nodes[node])
		}
		for n, p := range instances {
			if got := p.HasLog(`"Provisioning"`, `pv="`+pv.Name+`"`); got != (n == node) {
				t.Errorf("instance of %s provisioned the claim: %v, want %v", n, got, n == node)
			}
		}
		if got := claim.Annotations[annSelectedNode]; got != node {
			t.Errorf("claim's selected node %q, want %q", got, node)
		}
	}

	wffc := e.createClass(nil, waitForFirstConsumer)
	immediate := e.createClass(nil)
	onlyA := e.createClass(nil, func(c *storagev1.StorageClass) {
		c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: zoneKey, Values: []string{zoneA}},
		}}}
	})
	var claims []*corev1.PersistentVolumeClaim
	var pvs []*corev1.PersistentVolume

	t.Run("claim selected for node b", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(wffc.Name, "1Gi", selectedNode(nodeB)))
		provisionedBy(t, claim, pv, nodeB)
		claims, pvs = append(claims, claim), append(pvs, pv)
	})
	t.Run("Immediate claim: one instance wins", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(immediate.Name, "1Gi"))
		winner := claim.Annotations[annSelectedNode]
		if _, ok := nodes[winner]; !ok {
			t.Fatalf("claim's selected node %q is neither %s nor %s", winner, nodeA, nodeB)
		}
		provisionedBy(t, claim, pv, winner)
		claims, pvs = append(claims, claim), append(pvs, pv)
	})
	t.Run("Immediate claim: only a node allowed by allowedTopologies competes", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(onlyA.Name, "1Gi"))
		provisionedBy(t, claim, pv, nodeA)
		claims, pvs = append(claims, claim), append(pvs, pv)
	})
	t.Run("deletion: once, by the volume's node", func(t *testing.T) {
		e := e.on(t)
		if len(pvs) != 3 {
			t.Fatalf("%d volumes provisioned above, want 3", len(pvs))
		}
		for _, claim := range claims {
			e.deleteClaim(claim)
		}
		for _, pv := range pvs {
			e.pvGone(pv.Name)
		}
		e.noVolumeLeft()
		for i, pv := range pvs {
			var deletes int
			for _, r := range e.driver.DeleteRequests() {
				if r.GetVolumeId() == pv.Spec.CSI.VolumeHandle {
					deletes++
				}
			}
			if deletes != 1 {
				t.Errorf("DeleteVolume %s called %d times, want once", pv.Spec.CSI.VolumeHandle, deletes)
			}
			owner := claims[i].Annotations[annSelectedNode]
			for n, p := range instances {
				if got := p.HasLog(`"Volume deleted"`, `pv="`+pv.Name+`"`); got != (n == owner) {
					t.Errorf("instance of %s deleted %s: %v, want %v", n, pv.Name, got, n == owner)
				}
			}
		}
	})

	// Each instance keeps its own in-flight journal; none elects a leader.
	for _, node := range []string{nodeA, nodeB} {
		name := controller.JournalName(e.name, node)
		if _, err := cp.Client.CoreV1().ConfigMaps(home).Get(e.ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("in-flight journal of node %s: %v", node, err)
		}
	}
	leases, err := cp.Client.CoordinationV1().Leases(home).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("%d leader Leases in namespace %s, want none", len(leases.Items), home)
	}
	for _, p := range instances {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}
	cp.ExpectNoForbidden(t, user)
}

// TestNodeDeploymentNeedsNodeName: without NODE_NAME the instance does not
// start and says what to set.
func TestNodeDeploymentNeedsNodeName(t *testing.T) {
	e := newEnv(t, anyDriver, csidriver.Options{})
	p := e.startProvisioner("--node-deployment")
	err := exitError(e.ctx, p)
	if err == nil {
		t.Fatal("csi-provisioner started without NODE_NAME")
	}
	if !p.HasLog("--node-deployment needs the environment variable NODE_NAME") {
		t.Errorf("log does not say NODE_NAME is missing:\n%s", p.LogTail(20))
	}
}
