// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/pathpattern"
)

// KeyPathPattern is the class parameter naming each volume's directory.
const KeyPathPattern = pathpattern.Key

// DefaultPathPattern names a volume's directory "<namespace>-<claim>-<pv>"
// when the class sets no pathPattern.
const DefaultPathPattern = "${.PVC.namespace}-${.PVC.name}-${.PV.name}"

// MaxPathBytes bounds the directory a pathPattern names. NFSv3 clients
// mount paths of at most 1024 bytes (MNTPATHLEN), share included: a longer
// directory, made deep by a claim's annotations, could be created on the
// share but never mounted.
const MaxPathBytes = 1024

// ErrPathPattern marks every error of a pathPattern.
var ErrPathPattern = pathpattern.ErrPathPattern

// rules are the NFS share's additions to the rules of lib/pathpattern.
var rules = pathpattern.Rules{
	Default:        DefaultPathPattern,
	Root:           "the NFS share",
	MaxBytes:       MaxPathBytes,
	MaxBytesReason: "an NFS client can mount",
}

// Expand returns the directory, relative to the share, that pattern names
// for the claim and PV, with the former subdir provisioner's semantics
// (pathpattern.Rules.Lenient): a label or annotation the claim lacks is
// replaced by the empty string, empty and "." components are dropped, and a
// path left empty falls back to DefaultPathPattern. The safety rules of
// lib/pathpattern stay: the result is a relative path whose components are
// neither empty, "." nor "..", so that it stays inside the share whatever
// the claim's labels and annotations say. An empty pattern means
// DefaultPathPattern.
func Expand(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string) (string, error) {
	lenient := rules
	lenient.Lenient = true
	return pathpattern.Expand(pattern, pvc, pvName, lenient)
}

// ExpandStrict is Expand without leniency (--strict-parameters): a label or
// annotation the claim lacks (or has empty) is an error, and so is an empty
// or "." component of the expanded path; nothing falls back.
func ExpandStrict(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string) (string, error) {
	return pathpattern.Expand(pattern, pvc, pvName, rules)
}

// MetadataKeys returns the claim labels and annotations pattern reads.
func MetadataKeys(pattern string) (labels, annotations []string) {
	return pathpattern.MetadataKeys(pattern)
}
