// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// The checks every provisioner makes before it creates anything, with one
// message style, so that a user reading a ProvisioningFailed event learns
// what is wrong and what would be accepted.

// LabelManagedBy is the well-known label on the objects a provisioner
// creates besides PVs (journals, Secrets, helper pods), saying who manages
// them.
const LabelManagedBy = "app.kubernetes.io/managed-by"

// CheckParameters returns an error naming every parameter of class that is
// not in known, and what the provisioner understands; nil when all are
// known. A typo must never silently mean a default.
func CheckParameters(class *storagev1.StorageClass, known ...string) error {
	if class == nil {
		return nil
	}
	var unknown []string
	for k := range class.Parameters {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	if len(known) == 0 {
		return fmt.Errorf("unknown parameter(s) %s: %s takes no parameters", strings.Join(unknown, ", "), class.Provisioner)
	}
	return fmt.Errorf("unknown parameter(s) %s: %s understands %s",
		strings.Join(unknown, ", "), class.Provisioner, strings.Join(slices.Sorted(slices.Values(known)), ", "))
}

// CheckAccessModes returns an error naming the claim's access modes that are
// not in supported, and the supported ones; nil when all are.
func CheckAccessModes(claim *corev1.PersistentVolumeClaim, supported ...corev1.PersistentVolumeAccessMode) error {
	var unsupported []string
	for _, m := range claim.Spec.AccessModes {
		if !slices.Contains(supported, m) {
			unsupported = append(unsupported, string(m))
		}
	}
	if len(unsupported) == 0 {
		return nil
	}
	use := string(supported[len(supported)-1])
	if len(supported) > 1 {
		names := make([]string, len(supported)-1)
		for i, m := range supported[:len(supported)-1] {
			names[i] = string(m)
		}
		use = strings.Join(names, ", ") + " or " + use
	}
	return fmt.Errorf("access mode(s) %s not supported: use %s", strings.Join(unsupported, ", "), use)
}

// CheckOwner returns an IgnoredError unless the PV's annotation key records
// identity: the first thing a Delete does where several instances of one
// provisioner name (one per node, per site, per server) share the PVs, so
// that each deletes only what it created. The annotation is written by the
// provisioner at Provision time; anyone who can edit PVs can change it, so
// Delete must still check the asset itself before touching it.
func CheckOwner(pv *corev1.PersistentVolume, key, identity string) error {
	owner, ok := pv.Annotations[key]
	if !ok {
		return Ignore("PV %s has no %s annotation: it was not provisioned by an instance that records one", pv.Name, key)
	}
	if owner != identity {
		return Ignore("PV %s belongs to %q (annotation %s), this instance is %q", pv.Name, owner, key, identity)
	}
	return nil
}
