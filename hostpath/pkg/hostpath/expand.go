// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/hostpath/pkg/resize"
)

// The Provisioner is the Expander of hostpath-provisioner's resizer.
var _ resize.Expander = (*Provisioner)(nil)

// OwnsVolume implements resize.Expander: pv is a volume of this provisioner
// (a hostPath or local PV with the node annotation) that this instance
// serves, by the rule Delete uses: its node's volumes, shared volumes unless
// --node-local, and every node's with helper pods.
func (p *Provisioner) OwnsVolume(pv *corev1.PersistentVolume) bool {
	node := pv.Annotations[AnnNode]
	if node == "" || (pv.Spec.HostPath == nil && pv.Spec.Local == nil) {
		return false
	}
	shared := pv.Annotations[AnnShared] == "true" && !p.cfg.NodeLocal
	return node == p.cfg.Node || shared || p.anyNode
}

// ExpandVolume implements resize.Expander. A directory holds any size its
// filesystem has room for, and nothing limits it yet, so an owned volume
// needs no work: this placeholder accepts every size. The budget check of
// the volume's path and the raise of an enforced size limit (a project
// quota) replace this body; they return an error wrapping
// resize.ErrDoesNotFit when the volume cannot grow.
func (p *Provisioner) ExpandVolume(_ context.Context, pv *corev1.PersistentVolume, _ int64) error {
	if !p.OwnsVolume(pv) {
		return fmt.Errorf("volume %s is not served by this instance (node %s)", pv.Name, p.cfg.Node)
	}
	return nil
}
