// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/controller"
)

const zoneKey = "topology.kubernetes.io/zone"

func zoneNode(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if zone != "" {
		n.Labels[zoneKey] = zone
	}
	return n
}

func allowedTopologies(key string, zones ...string) []corev1.TopologySelectorTerm {
	return []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: zones}}}}
}

func zoneAffinity(key, zone string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
	}}}}
}

// TestProvisionZone: the zone asked of Cinder comes from the availability
// parameter, else the selected node's label, else allowedTopologies, else
// Cinder's default; the PV requires the zone Cinder reports.
func TestProvisionZone(t *testing.T) {
	cases := map[string]struct {
		opts     []Option
		params   map[string]string
		node     *corev1.Node
		allowed  []corev1.TopologySelectorTerm
		fallback map[string]string // the fake's zone fallback
		// wantAsked is the availability_zone sent to Cinder (nil: none).
		wantAsked any
		// wantZone is the PV's required zone ("": no node affinity).
		wantZone string
		wantKey  string
	}{
		"parameter": {
			params: map[string]string{"availability": "zone-b"}, wantAsked: "zone-b", wantZone: "zone-b",
		},
		"parameter wins over allowedTopologies that contain it": {
			params: map[string]string{"availability": "zone-b"}, allowed: allowedTopologies(zoneKey, "zone-a", "zone-b"),
			wantAsked: "zone-b", wantZone: "zone-b",
		},
		"parameter same as the selected node's": {
			params: map[string]string{"availability": "zone-b"}, node: zoneNode("n1", "zone-b"), wantAsked: "zone-b", wantZone: "zone-b",
		},
		"selected node": {
			node: zoneNode("n1", "zone-c"), wantAsked: "zone-c", wantZone: "zone-c",
		},
		"selected node wins over allowedTopologies": {
			node: zoneNode("n1", "zone-c"), allowed: allowedTopologies(zoneKey, "zone-a", "zone-c"), wantAsked: "zone-c", wantZone: "zone-c",
		},
		"selected node without the label: allowedTopologies": {
			node: zoneNode("n1", ""), allowed: allowedTopologies(zoneKey, "zone-a", "zone-c"), wantAsked: "zone-a", wantZone: "zone-a",
		},
		"allowedTopologies, first zone of the key": {
			allowed: append(allowedTopologies("other/key", "x"), allowedTopologies(zoneKey, "zone-d", "zone-e")...), wantAsked: "zone-d", wantZone: "zone-d",
		},
		"nothing: Cinder's default zone": {
			wantAsked: nil, wantZone: "nova",
		},
		"Cinder falls back to another zone: the PV follows Cinder": {
			node: zoneNode("n1", "zone-c"), fallback: map[string]string{"zone-c": "nova"}, wantAsked: "zone-c", wantZone: "nova",
		},
		"custom key": {
			opts: []Option{WithTopologyKey("example.com/az")}, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"example.com/az": "az1", zoneKey: "zone-z"}}},
			wantAsked: "az1", wantZone: "az1", wantKey: "example.com/az",
		},
		"topology off: parameter only, no affinity": {
			opts: []Option{WithTopologyKey("")}, params: map[string]string{"availability": "zone-b"}, node: zoneNode("n1", "zone-c"),
			allowed: allowedTopologies(zoneKey, "zone-a"), wantAsked: "zone-b",
		},
		"topology off: node and allowedTopologies ignored": {
			opts: []Option{WithTopologyKey("")}, node: zoneNode("n1", "zone-c"), allowed: allowedTopologies(zoneKey, "zone-a"), wantAsked: nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, append([]Option{WithTopologyKey(ZoneTopologyKey)}, tc.opts...)...)
			for k, v := range tc.fallback {
				e.cinder.zones[k] = v
			}
			o := provisionOptions(tc.params, "1Gi")
			o.StorageClass.AllowedTopologies = tc.allowed
			if tc.node != nil {
				o.SelectedNode, o.SelectedNodeName = tc.node, tc.node.Name
			}
			pv, state, err := e.p.Provision(ctx(t), o)
			if err != nil || state != controller.ProvisioningFinished {
				t.Fatalf("state %s, err %v", state, err)
			}
			if got := e.cinder.creates[0]["availability_zone"]; got != tc.wantAsked {
				t.Errorf("availability_zone sent = %v, want %v", got, tc.wantAsked)
			}
			var want *corev1.VolumeNodeAffinity
			if tc.wantZone != "" {
				key := tc.wantKey
				if key == "" {
					key = zoneKey
				}
				want = zoneAffinity(key, tc.wantZone)
			}
			if !equality.Semantic.DeepEqual(pv.Spec.NodeAffinity, want) {
				t.Errorf("node affinity = %+v, want %+v", pv.Spec.NodeAffinity, want)
			}
		})
	}
}

// TestProvisionZoneRetryUsesTheVolumesZone: a retry that finds the volume
// of an earlier attempt writes that volume's zone on the PV.
func TestProvisionZoneRetryUsesTheVolumesZone(t *testing.T) {
	e := newEnv(t, WithTopologyKey(ZoneTopologyKey))
	e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Zone: "zone-x",
		Metadata: map[string]string{MetaIdentity: testIdentity, MetaPVName: testPV}})
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	if want := zoneAffinity(zoneKey, "zone-x"); !equality.Semantic.DeepEqual(pv.Spec.NodeAffinity, want) {
		t.Errorf("node affinity = %+v", pv.Spec.NodeAffinity)
	}
	if len(e.cinder.creates) != 0 {
		t.Errorf("created %v", e.cinder.creates)
	}
}

// TestProvisionZoneConflicts: an availability parameter that contradicts
// allowedTopologies is a class error; one that contradicts the selected
// node sends the claim back to the scheduler. Neither calls Cinder.
func TestProvisionZoneConflicts(t *testing.T) {
	cases := map[string]struct {
		node      *corev1.Node
		allowed   []corev1.TopologySelectorTerm
		wantState controller.ProvisioningState
		want      []string
	}{
		"outside allowedTopologies": {
			allowed:   allowedTopologies(zoneKey, "zone-a", "zone-c"),
			wantState: controller.ProvisioningFinished,
			want:      []string{"StorageClass cinder", `parameter availability "zone-b" is not one of the zones its allowedTopologies allow for topology.kubernetes.io/zone (zone-a, zone-c)`},
		},
		"another zone than the selected node's": {
			node:      zoneNode("n1", "zone-c"),
			wantState: controller.ProvisioningReschedule,
			want:      []string{`availability zone "zone-b"`, `selected node n1 in zone "zone-c"`, "add allowedTopologies topology.kubernetes.io/zone: [zone-b]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, WithTopologyKey(ZoneTopologyKey))
			o := provisionOptions(map[string]string{"availability": "zone-b"}, "1Gi")
			o.StorageClass.AllowedTopologies = tc.allowed
			if tc.node != nil {
				o.SelectedNode, o.SelectedNodeName = tc.node, tc.node.Name
			}
			_, state, err := e.p.Provision(ctx(t), o)
			if err == nil || state != tc.wantState {
				t.Fatalf("state %s, err %v", state, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			assertCalls(t, e.cinder)
		})
	}
}

func TestReadsSelectedNode(t *testing.T) {
	if !newEnv(t, WithTopologyKey(ZoneTopologyKey)).p.ReadsSelectedNode() {
		t.Error("topology on: does not read the selected node")
	}
	if newEnv(t).p.ReadsSelectedNode() {
		t.Error("default (topology off): reads the selected node")
	}
	if _, err := New(newFakeCinder(t).client(), newEnv(t).kube, testIdentity, WithTopologyKey("not a key")); err == nil {
		t.Error("WithTopologyKey accepted a bad key")
	}
}
