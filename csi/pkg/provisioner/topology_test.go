// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/lib/controller"
)

const (
	zoneKey = "topology.example.com/zone"
	rackKey = "topology.example.com/rack"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func csiNode(name, driver string, keys ...string) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: name, TopologyKeys: keys}}}}
}

func seg(kv ...string) *csi.Topology {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &csi.Topology{Segments: m}
}

func topologies(ts []*csi.Topology) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, describeTopology(t))
	}
	return strings.Join(parts, " ")
}

// topologyCluster is three nodes of the driver in zones a, b, c (node-c on
// rack 2 of c) and one node without the driver.
func topologyCluster() []runtime.Object {
	return []runtime.Object{
		node("node-a", map[string]string{zoneKey: "a", rackKey: "1"}), csiNode("node-a", testDriver, zoneKey, rackKey),
		node("node-b", map[string]string{zoneKey: "b", rackKey: "1"}), csiNode("node-b", testDriver, zoneKey, rackKey),
		node("node-c", map[string]string{zoneKey: "c", rackKey: "2"}), csiNode("node-c", testDriver, zoneKey, rackKey),
		node("node-x", map[string]string{zoneKey: "x", rackKey: "9"}), csiNode("node-x", "other.example.com", zoneKey),
		node("unregistered", map[string]string{zoneKey: "u", rackKey: "1"}),
		node("unlabelled", nil), csiNode("unlabelled", testDriver, zoneKey, rackKey),
	}
}

func newTopologyProvisioner(t *testing.T, cfg Config) *Provisioner {
	t.Helper()
	client := fake.NewClientset(topologyCluster()...)
	factory := informers.NewSharedInformerFactory(client, 0)
	cfg.DriverName, cfg.Controller, cfg.Client, cfg.Informers = testDriver, &fakeController{}, client, factory
	cfg.Capabilities = connection.Capabilities{Topology: true}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	return p
}

func TestTopologyRequirements(t *testing.T) {
	allowedAB := []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: zoneKey, Values: []string{"a", "b"}}}}}
	tests := []struct {
		name          string
		cfg           Config
		allowed       []corev1.TopologySelectorTerm
		selected      string
		wantNil       bool
		wantRequisite string
		// wantFirst is the first preferred segment; the others are checked by count.
		wantFirst string
		wantErr   string
		wantState controller.ProvisioningState
	}{
		{name: "immediate, all nodes of the driver", cfg: Config{ImmediateTopology: true},
			wantRequisite: "{" + rackKey + "=1," + zoneKey + "=a} {" + rackKey + "=1," + zoneKey + "=b} {" + rackKey + "=2," + zoneKey + "=c}"},
		{name: "immediate topology off", wantNil: true},
		{name: "immediate, allowedTopologies", cfg: Config{ImmediateTopology: true}, allowed: allowedAB,
			wantRequisite: "{" + zoneKey + "=a} {" + zoneKey + "=b}"},
		{name: "selected node, preferred first", selected: "node-b",
			wantRequisite: "{" + rackKey + "=1," + zoneKey + "=a} {" + rackKey + "=1," + zoneKey + "=b} {" + rackKey + "=2," + zoneKey + "=c}",
			wantFirst:     "{" + rackKey + "=1," + zoneKey + "=b}"},
		{name: "selected node, allowedTopologies", selected: "node-b", allowed: allowedAB,
			wantRequisite: "{" + zoneKey + "=a} {" + zoneKey + "=b}", wantFirst: "{" + zoneKey + "=b}"},
		{name: "selected node, strict", cfg: Config{StrictTopology: true}, selected: "node-c",
			wantRequisite: "{" + rackKey + "=2," + zoneKey + "=c}", wantFirst: "{" + rackKey + "=2," + zoneKey + "=c}"},
		{name: "selected node outside allowedTopologies", selected: "node-c", allowed: allowedAB,
			wantErr: "node node-c has topology", wantState: controller.ProvisioningReschedule},
		{name: "selected node gone", selected: "absent", wantErr: "selected node absent does not exist", wantState: controller.ProvisioningReschedule},
		{name: "driver not registered on the node", selected: "unregistered",
			wantErr: "CSI driver " + testDriver + " is not registered on node unregistered", wantState: controller.ProvisioningNoChange},
		{name: "node without the topology labels", selected: "unlabelled",
			wantErr: "node unlabelled has no label " + zoneKey, wantState: controller.ProvisioningNoChange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTopologyProvisioner(t, tc.cfg)
			class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, AllowedTopologies: tc.allowed}
			req, err := p.topologyRequirements(testContext(t), class, newClaim(), tc.selected)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got := topologyState(err); got != tc.wantState {
					t.Errorf("state %s, want %s", got, tc.wantState)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNil {
				if req != nil {
					t.Fatalf("requirement %v, want none", req)
				}
				return
			}
			if got := topologies(sortTopologies(req.Requisite)); got != tc.wantRequisite {
				t.Errorf("requisite %s, want %s", got, tc.wantRequisite)
			}
			if len(req.Preferred) != len(req.Requisite) {
				t.Errorf("preferred %s is not an ordering of requisite", topologies(req.Preferred))
			}
			if tc.wantFirst != "" && describeTopology(req.Preferred[0]) != tc.wantFirst {
				t.Errorf("first preferred %s, want %s", describeTopology(req.Preferred[0]), tc.wantFirst)
			}
		})
	}
}

// TestNoTopologyCapability: a driver without topology gets no requirement.
func TestNoTopologyCapability(t *testing.T) {
	p, _ := newTestProvisioner(t, Config{ImmediateTopology: true})
	req, err := p.topologyRequirements(testContext(t), &storagev1.StorageClass{}, newClaim(), "node-a")
	if req != nil || err != nil {
		t.Errorf("requirement %v, error %v; want none", req, err)
	}
}

func TestFlattenAllowedTopologies(t *testing.T) {
	terms := []corev1.TopologySelectorTerm{
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"a", "b"}}, {Key: "rack", Values: []string{"1", "2"}}}},
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"a"}}, {Key: "rack", Values: []string{"1"}}}},
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"c"}}}},
	}
	got := topologies(flattenAllowedTopologies(terms))
	want := "{rack=1,zone=a} {rack=2,zone=a} {rack=1,zone=b} {rack=2,zone=b} {zone=c}"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestSpreadIndex: a StatefulSet's claims get consecutive rotations, so
// that its replicas' volumes land in different segments.
func TestSpreadIndex(t *testing.T) {
	ts := []*csi.Topology{seg("zone", "a"), seg("zone", "b"), seg("zone", "c")}
	first := map[string]bool{}
	for _, name := range []string{"data-web-0", "data-web-1", "data-web-2"} {
		first[describeTopology(rotate(ts, spreadIndex(name))[0])] = true
	}
	if len(first) != 3 {
		t.Errorf("three replicas start in %d segments, want 3", len(first))
	}
	if spreadIndex("data-web-1") != spreadIndex("data-web-0")+1 {
		t.Errorf("ordinals are not consecutive")
	}
}
