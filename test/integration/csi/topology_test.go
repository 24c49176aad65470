// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/csidriver"
)

const zoneKey = "topology.test.kubeprov.io/zone"

// createNode creates a Node with the zone label and, when registered, the
// CSINode entry node-driver-registrar would write for the env's driver.
func (e *env) createNode(zone string, registered bool) string {
	e.t.Helper()
	name := uniqueName("node")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zoneKey: zone, "kubernetes.io/hostname": name}}}
	if _, err := cp.Client.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if !registered {
		return name
	}
	csiNode := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: e.name, NodeID: "id-" + name, TopologyKeys: []string{zoneKey},
		}}},
	}
	if _, err := cp.Client.StorageV1().CSINodes().Create(e.ctx, csiNode, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cp.Client.StorageV1().CSINodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func zones(ts []*csi.Topology) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.GetSegments()[zoneKey])
	}
	return out
}

func sortedZones(ts []*csi.Topology) []string {
	out := zones(ts)
	sort.Strings(out)
	return out
}

// affinityZones returns the zones a PV's node affinity allows.
func affinityZones(pv *corev1.PersistentVolume) []string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var out []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, expr := range term.MatchExpressions {
			if expr.Key == zoneKey && expr.Operator == corev1.NodeSelectorOpIn {
				out = append(out, expr.Values...)
			}
		}
	}
	return out
}

func selectedNode(node string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
	}
}

func waitForFirstConsumer(c *storagev1.StorageClass) {
	c.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
}

// TestTopology: topology requirements from the nodes the driver runs on,
// from allowedTopologies and from the selected node, and PV node affinity
// from the segment the driver chose.
func TestTopology(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{Topology: true})
	e.createNode("a", true)
	nodeB := e.createNode("b", true)
	e.createNode("c", true)
	unregistered := e.createNode("d", false)
	immediate := e.createClass(nil)
	allowed := e.createClass(nil, func(c *storagev1.StorageClass) {
		c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: zoneKey, Values: []string{"b", "c"}},
		}}}
	})
	wffc := e.createClass(nil, waitForFirstConsumer)

	check := func(t *testing.T, pv *corev1.PersistentVolume, wantRequisite []string, wantFirst string) {
		t.Helper()
		req := e.driver.LastCreateRequest(pv.Name).GetAccessibilityRequirements()
		if got := sortedZones(req.GetRequisite()); !slices.Equal(got, wantRequisite) {
			t.Errorf("requisite zones %v, want %v", got, wantRequisite)
		}
		if got := sortedZones(req.GetPreferred()); !slices.Equal(got, wantRequisite) {
			t.Errorf("preferred zones %v are not the requisite ones %v", got, wantRequisite)
		}
		first := req.GetPreferred()[0].GetSegments()[zoneKey]
		if wantFirst != "" && first != wantFirst {
			t.Errorf("first preferred zone %s, want %s", first, wantFirst)
		}
		if got := affinityZones(pv); !slices.Equal(got, []string{first}) {
			t.Errorf("PV node affinity zones %v, want the driver's choice %s", got, first)
		}
	}

	t.Run("immediate: every zone of the driver", func(t *testing.T) {
		e := e.on(t)
		_, pv := e.bound(e.createClaim(immediate.Name, "1Gi"))
		check(t, pv, []string{"a", "b", "c"}, "")
	})
	t.Run("immediate: allowedTopologies", func(t *testing.T) {
		e := e.on(t)
		_, pv := e.bound(e.createClaim(allowed.Name, "1Gi"))
		check(t, pv, []string{"b", "c"}, "")
	})
	t.Run("selected node preferred", func(t *testing.T) {
		e := e.on(t)
		_, pv := e.bound(e.createClaim(wffc.Name, "1Gi", selectedNode(nodeB)))
		check(t, pv, []string{"a", "b", "c"}, "b")
	})
	t.Run("driver not registered on the selected node", func(t *testing.T) {
		e := e.on(t)
		claim := e.createClaim(wffc.Name, "1Gi", selectedNode(unregistered))
		e.event(claim, "ProvisioningFailed", "CSI driver "+e.name+" is not registered on node "+unregistered, "node-driver-registrar")
	})
}

// TestTopologyReschedule: a driver out of room on the selected node
// (ResourceExhausted) makes the scheduler pick another node.
func TestTopologyReschedule(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{Topology: true})
	nodeB := e.createNode("b", true)
	wffc := e.createClass(nil, waitForFirstConsumer)
	e.inProcess.FailCreate(csidriver.Fault{Code: codes.ResourceExhausted, Message: "no room left in zone b"})
	claim := e.createClaim(wffc.Name, "1Gi", selectedNode(nodeB))
	e.event(claim, "ProvisioningFailed", "asking the scheduler for another node", "no room left in zone b")
	e.eventually("the selected-node annotation to be removed", func() bool {
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, claim.Name, metav1.GetOptions{})
		return err == nil && c.Annotations["volume.kubernetes.io/selected-node"] == ""
	})
	if _, ok := e.driver.Volume(pvName(claim)); ok {
		t.Error("the driver holds a volume for a rescheduled claim")
	}
}

// TestStrictTopology: --strict-topology requires only the selected node's
// segment; --immediate-topology=false leaves Immediate volumes to the driver.
func TestStrictTopology(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{Topology: true}, "--strict-topology", "--immediate-topology=false")
	e.createNode("a", true)
	nodeB := e.createNode("b", true)
	_, pv := e.bound(e.createClaim(e.createClass(nil, waitForFirstConsumer).Name, "1Gi", selectedNode(nodeB)))
	req := e.driver.LastCreateRequest(pv.Name).GetAccessibilityRequirements()
	if got := zones(req.GetRequisite()); !slices.Equal(got, []string{"b"}) {
		t.Errorf("requisite zones %v, want only the selected node's", got)
	}
	if got := affinityZones(pv); !slices.Equal(got, []string{"b"}) {
		t.Errorf("PV node affinity zones %v, want b", got)
	}

	_, pv = e.bound(e.createClaim(e.createClass(nil).Name, "1Gi"))
	if req := e.driver.LastCreateRequest(pv.Name).GetAccessibilityRequirements(); req != nil {
		t.Errorf("accessibility requirements %v, want none", req)
	}
	if pv.Spec.NodeAffinity != nil {
		t.Errorf("node affinity %v for a volume reachable anywhere", pv.Spec.NodeAffinity)
	}
}
