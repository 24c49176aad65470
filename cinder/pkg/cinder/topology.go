// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeprov/external-storage/lib/controller"
)

// DefaultTopologyKey is "": no topology. OpenStack attaches volumes across
// availability zones unless Nova's cross_az_attach is off, and Cinder's zone
// names often differ from Nova's, so node affinity by zone is opt-in.
const DefaultTopologyKey = ""

// ZoneTopologyKey is the node label cloud controller managers put on every
// node with its availability zone: the usual WithTopologyKey when Cinder's
// zones are Nova's.
const ZoneTopologyKey = corev1.LabelTopologyZone

// WithTopologyKey sets the node label whose value is a node's availability
// zone (usually ZoneTopologyKey). "" (DefaultTopologyKey) turns topology off: volumes get Cinder's
// zone choice (or the class's availability parameter) and PVs no node
// affinity.
func WithTopologyKey(key string) Option {
	return optionFunc(func(cfg *config) error {
		if key != "" {
			if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
				return fmt.Errorf("WithTopologyKey: %q is not a label key: %s", key, strings.Join(msgs, "; "))
			}
		}
		cfg.topologyKey = key
		return nil
	})
}

// ReadsSelectedNode implements controller.SelectedNodeReader: with a
// topology key the zone of a WaitForFirstConsumer volume is the selected
// node's.
func (p *Provisioner) ReadsSelectedNode() bool { return p.cfg.topologyKey != "" }

// zoneError is a zone that does not fit the class or the selected node,
// with the state the controller must take.
type zoneError struct {
	state controller.ProvisioningState
	msg   string
}

func (e *zoneError) Error() string { return e.msg }

// availabilityZone is the zone to create the volume in, and where it came
// from (for the log): the class parameter availability, else the selected
// node's zone label, else the first zone the class's allowedTopologies
// allow, else "" (Cinder's default zone). Without a topology key only the
// parameter counts.
func (p *Provisioner) availabilityZone(o controller.ProvisionOptions, class *storagev1.StorageClass, cp classParams) (zone, source string, err error) {
	key := p.cfg.topologyKey
	if key == "" {
		return cp.availability, ParamAvailability, nil
	}
	allowed := allowedZones(class, key)
	nodeZone := ""
	if o.SelectedNode != nil {
		nodeZone = o.SelectedNode.Labels[key]
	}
	switch {
	case cp.availability != "":
		if len(allowed) > 0 && !slices.Contains(allowed, cp.availability) {
			return "", "", &zoneError{state: controller.ProvisioningFinished, msg: fmt.Sprintf(
				"StorageClass %s: parameter %s %q is not one of the zones its allowedTopologies allow for %s (%s): fix the class (recreate it) and the claim is retried",
				class.Name, ParamAvailability, cp.availability, key, strings.Join(allowed, ", "))}
		}
		if nodeZone != "" && nodeZone != cp.availability {
			return "", "", &zoneError{state: controller.ProvisioningReschedule, msg: fmt.Sprintf(
				"StorageClass %s puts volumes in availability zone %q (parameter %s) but the scheduler selected node %s in zone %q (label %s), where a pod could not use the volume: "+
					"to keep pods in that zone, add allowedTopologies %s: [%s] to the class",
				class.Name, cp.availability, ParamAvailability, o.SelectedNode.Name, nodeZone, key, key, cp.availability)}
		}
		return cp.availability, ParamAvailability, nil
	case nodeZone != "":
		return nodeZone, "selectedNode", nil
	case len(allowed) > 0:
		return allowed[0], "allowedTopologies", nil
	}
	return "", "", nil
}

// allowedZones are the values the class's allowedTopologies give key, in
// their order, without repeats.
func allowedZones(class *storagev1.StorageClass, key string) []string {
	var zones []string
	for _, term := range class.AllowedTopologies {
		for _, expr := range term.MatchLabelExpressions {
			if expr.Key != key {
				continue
			}
			for _, v := range expr.Values {
				if !slices.Contains(zones, v) {
					zones = append(zones, v)
				}
			}
		}
	}
	return zones
}

// nodeAffinity requires the topology key to be zone; nil without a key or
// a zone.
func (p *Provisioner) nodeAffinity(zone string) *corev1.VolumeNodeAffinity {
	if p.cfg.topologyKey == "" || zone == "" {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key:      p.cfg.topologyKey,
				Operator: corev1.NodeSelectorOpIn,
				Values:   []string{zone},
			}},
		}},
	}}
}
