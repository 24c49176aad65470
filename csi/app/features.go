// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"k8s.io/component-base/featuregate"
)

// The upstream sidecar's feature gates (--feature-gates), with its defaults.
const (
	// Topology: use the driver's topology (VOLUME_ACCESSIBILITY_CONSTRAINTS).
	// GA; false ignores the driver's topology.
	Topology featuregate.Feature = "Topology"
	// HonorPVReclaimPolicy: GA, locked to true.
	HonorPVReclaimPolicy featuregate.Feature = "HonorPVReclaimPolicy"
	// CrossNamespaceVolumeDataSource: data sources in other namespaces
	// (dataSourceRef.namespace, with a ReferenceGrant). Alpha, off.
	CrossNamespaceVolumeDataSource featuregate.Feature = "CrossNamespaceVolumeDataSource"
	// VolumeAttributesClass: the claim's VolumeAttributesClass parameters
	// passed to CreateVolume. GA.
	VolumeAttributesClass featuregate.Feature = "VolumeAttributesClass"
	// ReleaseLeaderElectionOnExit: give the leader Lease up on SIGTERM or
	// SIGINT, once the controllers have stopped, so that a standby takes
	// over at once. Alpha and off upstream; here the Lease is released on
	// every graceful stop, so the gate only keeps upstream's manifests valid.
	ReleaseLeaderElectionOnExit featuregate.Feature = "ReleaseLeaderElectionOnExit"
)

var features = map[featuregate.Feature]featuregate.FeatureSpec{
	Topology:                       {Default: true, PreRelease: featuregate.GA},
	HonorPVReclaimPolicy:           {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	CrossNamespaceVolumeDataSource: {Default: false, PreRelease: featuregate.Alpha},
	VolumeAttributesClass:          {Default: true, PreRelease: featuregate.GA},
	ReleaseLeaderElectionOnExit:    {Default: false, PreRelease: featuregate.Alpha},
}

// newFeatureGate returns a gate that knows the sidecar's features; an
// unknown one given to --feature-gates is an error naming it.
func newFeatureGate() featuregate.MutableVersionedFeatureGate {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(features); err != nil {
		panic(err) // a constant map, known to be valid
	}
	return fg
}
