// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

// gauge is the value of an unlabelled gauge the process serves, or an error
// naming what is missing.
func gauge(p *framework.Process, name string) (float64, error) {
	rsp, err := framework.ScrapeMetrics("http://" + p.Endpoint + "/metrics")
	if err != nil {
		return 0, err
	}
	f := rsp[name]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].Gauge == nil {
		return 0, fmt.Errorf("no gauge %s", name)
	}
	return f.Metric[0].Gauge.GetValue(), nil
}

// TestNodeDeploymentCapacity: with --node-deployment and --enable-capacity
// every instance publishes the capacity of its own node's segment under a
// managed-by label of its own (upstream's external-provisioner-<node>),
// counts its objects in the upstream gauges, and competes for an Immediate
// claim only when the driver reports room for it on its node.
func TestNodeDeploymentCapacity(t *testing.T) {
	e := newEnv(t, inProcessDriver, csidriver.Options{Topology: true})
	zoneA, zoneB := uniqueName("zone-a"), uniqueName("zone-b")
	nodeA, nodeB := e.createNode(zoneA, true), e.createNode(zoneB, true)
	e.inProcess.SetCapacity("", map[string]string{zoneKey: zoneA}, 1<<30)
	e.inProcess.SetCapacity("", map[string]string{zoneKey: zoneB}, 10<<30)
	user, home, kubeconfig := e.deployUser()
	wffc := e.createClass(nil, waitForFirstConsumer)
	immediate := e.createClass(nil)
	// Node a's instance looks at Immediate claims first, so that without
	// the capacity check it would take the claim it has no room for.
	delays := map[string][]string{
		nodeA: {"--node-deployment-base-delay=1s", "--node-deployment-max-delay=2s"},
		nodeB: {"--node-deployment-base-delay=4s", "--node-deployment-max-delay=8s"},
	}
	instances := map[string]*framework.Process{}
	for _, node := range []string{nodeA, nodeB} {
		instances[node] = e.startReplica(backend.Replica{
			Env: []string{"NODE_NAME=" + node, "NAMESPACE=" + home},
			Args: append([]string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + home, "--node-deployment",
				"--enable-capacity", "--capacity-poll-interval=1s", "--capacity-ownerref-level=-1"}, delays[node]...),
		})
	}
	for _, p := range instances {
		if err := p.WaitReady(e.ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("each instance publishes its node's segment", func(t *testing.T) {
		want := []string{
			fmt.Sprintf("external-provisioner-%s %s %s 1Gi", nodeA, wffc.Name, zoneA),
			fmt.Sprintf("external-provisioner-%s %s %s 10Gi", nodeB, wffc.Name, zoneB),
		}
		var got []string
		err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			list, err := cp.Client.StorageV1().CSIStorageCapacities(home).List(e.ctx, metav1.ListOptions{LabelSelector: driverNameLabel + "=" + e.name})
			if err != nil {
				return false, err
			}
			got = nil
			for _, c := range list.Items {
				got = append(got, fmt.Sprintf("%s %s %s %s", c.Labels[managedByLabel], c.StorageClassName,
					c.NodeTopology.MatchLabels[zoneKey], c.Capacity))
			}
			slices.Sort(got)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("CSIStorageCapacity objects (managed-by class zone capacity) %q, want %q", got, want)
		}
	})

	t.Run("object counts in the upstream gauges", func(t *testing.T) {
		// One class, one segment per instance: one object wanted and there.
		want := map[string]float64{"csistoragecapacities_desired_goal": 1, "csistoragecapacities_desired_current": 1, "csistoragecapacities_obsolete": 0}
		for node, p := range instances {
			for name, value := range want {
				got, err := gauge(p, name)
				if err != nil || got != value {
					t.Errorf("instance of %s: %s = %v (%v), want %v", node, name, got, err, value)
				}
			}
		}
	})

	t.Run("Immediate claim goes to the node with room", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(immediate.Name, "5Gi"))
		if got := claim.Annotations[annSelectedNode]; got != nodeB {
			t.Errorf("claim's selected node %q, want %s, the only one with 5Gi free", got, nodeB)
		}
		if got := affinityZones(pv); !slices.Equal(got, []string{zoneB}) {
			t.Errorf("PV node affinity zones %v, want %s", got, zoneB)
		}
		if instances[nodeA].HasLog("Selected this node for the claim") {
			t.Errorf("the instance of %s, which has 1Gi free, selected its node for a 5Gi claim", nodeA)
		}
		e.deleteClaim(claim)
		e.pvGone(pv.Name)
	})

	for _, p := range instances {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}
	cp.ExpectNoForbidden(t, user)
}
