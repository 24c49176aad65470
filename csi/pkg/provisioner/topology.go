// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprov/external-storage/lib/controller"
)

// errReschedule marks a selected node that cannot host the volume whatever
// the driver says: it is gone, or outside the class's allowedTopologies.
var errReschedule = errors.New("the scheduler must choose another node")

// topologyRequirements computes what CreateVolume must be told about where
// the volume has to be reachable from. nil means anywhere.
//
// Immediate binding: the class's allowedTopologies; without them, with
// --immediate-topology, every topology segment of the nodes where the driver
// runs; otherwise nothing, and the driver chooses.
//
// A selected node (WaitForFirstConsumer): with --strict-topology only the
// node's own segment; otherwise allowedTopologies (or every segment with the
// node's topology keys) with the node's own segments preferred.
//
// Preferred segments list all requisite ones in an order that spreads claims
// over them: sorted, then rotated by a hash of the claim name, so that a
// StatefulSet's claims land on consecutive segments.
func (p *Provisioner) topologyRequirements(ctx context.Context, class *storagev1.StorageClass, claim *corev1.PersistentVolumeClaim, selectedNode string) (*csi.TopologyRequirement, error) {
	if !p.cfg.Capabilities.Topology {
		return nil, nil
	}
	if err := p.waitForTopologyCaches(ctx); err != nil {
		return nil, err
	}
	allowed := flattenAllowedTopologies(class.AllowedTopologies)
	spread := spreadIndex(claim.Name)
	if selectedNode == "" {
		return p.immediateRequirements(allowed, spread)
	}
	return p.nodeRequirements(class.Name, selectedNode, allowed, spread)
}

// immediateRequirements are topologyRequirements for immediate binding,
// given the class's allowed segments.
func (p *Provisioner) immediateRequirements(allowed []*csi.Topology, spread uint32) (*csi.TopologyRequirement, error) {
	requisite := allowed
	if len(requisite) == 0 {
		if !p.cfg.ImmediateTopology {
			return nil, nil
		}
		var err error
		if requisite, err = p.clusterTopologies(nil); err != nil {
			return nil, err
		}
	}
	if len(requisite) == 0 {
		return nil, nil
	}
	return &csi.TopologyRequirement{Requisite: requisite, Preferred: rotate(sortTopologies(requisite), spread)}, nil
}

// nodeRequirements are topologyRequirements for the selected node, given
// the allowed segments of the class className.
func (p *Provisioner) nodeRequirements(className, selectedNode string, allowed []*csi.Topology, spread uint32) (*csi.TopologyRequirement, error) {
	keys, segment, err := p.nodeTopology(selectedNode)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	if len(allowed) > 0 && !slices.ContainsFunc(allowed, func(t *csi.Topology) bool { return isSubset(t.Segments, segment.Segments) }) {
		return nil, fmt.Errorf("node %s has topology %s, which StorageClass %s does not allow in allowedTopologies: %w",
			selectedNode, describeTopology(segment), className, errReschedule)
	}
	if p.cfg.StrictTopology {
		return &csi.TopologyRequirement{Requisite: []*csi.Topology{segment}, Preferred: []*csi.Topology{segment}}, nil
	}
	requisite := allowed
	if len(requisite) == 0 {
		if requisite, err = p.clusterTopologies(keys); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(requisite, func(t *csi.Topology) bool { return maps.Equal(t.Segments, segment.Segments) }) {
			requisite = append(requisite, segment)
		}
	}
	return &csi.TopologyRequirement{Requisite: requisite, Preferred: ownFirst(requisite, segment, spread)}, nil
}

// ownFirst orders the requisite segments for preference: the segments that
// contain the node's segment first, each group in spread order.
func ownFirst(requisite []*csi.Topology, segment *csi.Topology, spread uint32) []*csi.Topology {
	var own, others []*csi.Topology
	for _, t := range sortTopologies(requisite) {
		if isSubset(t.Segments, segment.Segments) {
			own = append(own, t)
		} else {
			others = append(others, t)
		}
	}
	return append(rotate(own, spread), rotate(others, spread)...)
}

// waitForTopologyCaches waits, the first time only, for the Node and CSINode caches.
func (p *Provisioner) waitForTopologyCaches(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), p.topologySynced...) {
		return fmt.Errorf("waiting for the Node and CSINode caches: %w", context.Cause(ctx))
	}
	return nil
}

// nodeTopology returns the driver's topology keys on a node, as its CSINode
// object lists them, and the node's segment: those keys with the node's
// label values.
func (p *Provisioner) nodeTopology(nodeName string) ([]string, *csi.Topology, error) {
	node, err := p.nodes.Get(nodeName)
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("selected node %s does not exist: %w", nodeName, errReschedule)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	csiNode, err := p.csiNodes.Get(nodeName)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("reading CSINode %s: %w", nodeName, err)
	}
	keys, registered := driverTopologyKeys(csiNode, p.cfg.DriverName)
	if !registered {
		return nil, nil, fmt.Errorf("CSI driver %s is not registered on node %s (its CSINode object does not list the driver): "+
			"check that the driver and node-driver-registrar run on that node", p.cfg.DriverName, nodeName)
	}
	segment, missing := segmentOf(node, keys)
	if missing != "" {
		return nil, nil, fmt.Errorf("node %s has no label %s, which CSI driver %s reports as a topology key: check the driver's node plugin",
			nodeName, missing, p.cfg.DriverName)
	}
	return keys, segment, nil
}

// clusterTopologies returns the segments of every node the driver is
// registered on; with keys, only of nodes whose driver reports exactly those
// keys, as the CSI spec requires requisite segments to share their keys.
func (p *Provisioner) clusterTopologies(keys []string) ([]*csi.Topology, error) {
	csiNodes, err := p.csiNodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing CSINodes: %w", err)
	}
	var out []*csi.Topology
	for _, csiNode := range csiNodes {
		nodeKeys, registered := driverTopologyKeys(csiNode, p.cfg.DriverName)
		if !registered || len(nodeKeys) == 0 || (keys != nil && !sameKeys(keys, nodeKeys)) {
			continue
		}
		node, err := p.nodes.Get(csiNode.Name)
		if err != nil {
			continue // a CSINode outlives its Node briefly
		}
		segment, missing := segmentOf(node, nodeKeys)
		if missing != "" {
			continue
		}
		if !slices.ContainsFunc(out, func(t *csi.Topology) bool { return maps.Equal(t.Segments, segment.Segments) }) {
			out = append(out, segment)
		}
	}
	return sortTopologies(out), nil
}

func driverTopologyKeys(csiNode *storagev1.CSINode, driver string) ([]string, bool) {
	if csiNode == nil {
		return nil, false
	}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == driver {
			return d.TopologyKeys, true
		}
	}
	return nil, false
}

// segmentOf returns the node's values of keys, or the first key it lacks.
func segmentOf(node *corev1.Node, keys []string) (*csi.Topology, string) {
	segments := make(map[string]string, len(keys))
	for _, k := range keys {
		v, ok := node.Labels[k]
		if !ok {
			return nil, k
		}
		segments[k] = v
	}
	return &csi.Topology{Segments: segments}, ""
}

func sameKeys(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// flattenAllowedTopologies turns allowedTopologies into segments: one per
// combination of the values of each term's expressions.
func flattenAllowedTopologies(terms []corev1.TopologySelectorTerm) []*csi.Topology {
	var out []*csi.Topology
	for _, term := range terms {
		combos := []map[string]string{{}}
		for _, expr := range term.MatchLabelExpressions {
			var next []map[string]string
			for _, c := range combos {
				for _, v := range expr.Values {
					m := maps.Clone(c)
					m[expr.Key] = v
					next = append(next, m)
				}
			}
			combos = next
		}
		for _, c := range combos {
			if len(c) > 0 && !slices.ContainsFunc(out, func(t *csi.Topology) bool { return maps.Equal(t.Segments, c) }) {
				out = append(out, &csi.Topology{Segments: c})
			}
		}
	}
	return out
}

// isSubset reports whether every key of sub has the same value in super.
func isSubset(sub, super map[string]string) bool {
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return true
}

// describeTopology prints a segment as sorted key=value pairs.
func describeTopology(t *csi.Topology) string {
	parts := make([]string, 0, len(t.Segments))
	for _, k := range slices.Sorted(maps.Keys(t.Segments)) {
		parts = append(parts, k+"="+t.Segments[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// sortTopologies returns the segments in a stable order.
func sortTopologies(ts []*csi.Topology) []*csi.Topology {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b *csi.Topology) int { return strings.Compare(describeTopology(a), describeTopology(b)) })
	return out
}

// rotate starts the list at index n (modulo its length).
func rotate(ts []*csi.Topology, n uint32) []*csi.Topology {
	if len(ts) == 0 {
		return nil
	}
	i := int(n) % len(ts)
	return append(slices.Clone(ts[i:]), ts[:i]...)
}

var ordinalSuffix = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// spreadIndex maps a claim name to a rotation: a hash of the name, except
// that names ending in -<n> (StatefulSet claims) use the hash of the rest
// plus n, so that consecutive replicas get consecutive segments.
func spreadIndex(claimName string) uint32 {
	base, ordinal := claimName, uint32(0)
	if m := ordinalSuffix.FindStringSubmatch(claimName); m != nil {
		if n, err := strconv.ParseUint(m[2], 10, 32); err == nil {
			base, ordinal = m[1], uint32(n)
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(base))
	return h.Sum32() + ordinal
}

// nodeAffinity turns the segments the driver says the volume is reachable
// from into PV node affinity: one term per segment.
func nodeAffinity(topologies []*csi.Topology) *corev1.VolumeNodeAffinity {
	var terms []corev1.NodeSelectorTerm
	for _, t := range topologies {
		if len(t.GetSegments()) == 0 {
			continue
		}
		var exprs []corev1.NodeSelectorRequirement
		for _, k := range slices.Sorted(maps.Keys(t.Segments)) {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{t.Segments[k]}})
		}
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	if len(terms) == 0 {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

// topologyState says what a topology error means for the claim.
func topologyState(err error) controller.ProvisioningState {
	if errors.Is(err, errReschedule) {
		return controller.ProvisioningReschedule
	}
	return controller.ProvisioningNoChange
}
