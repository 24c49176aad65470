// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/hostpath/pkg/resize"
)

// The Provisioner is the Expander of hostpath-provisioner's resizer.
var _ resize.Expander = (*Provisioner)(nil)

// OwnsVolume implements resize.Expander: pv is a volume of this provisioner
// (a hostPath or local PV with the node annotation) that this instance
// serves (servesVolume, the rule Delete uses).
func (p *Provisioner) OwnsVolume(pv *corev1.PersistentVolume) bool {
	if pv.Annotations[AnnNode] == "" || (pv.Spec.HostPath == nil && pv.Spec.Local == nil) {
		return false
	}
	return p.servesVolume(pv)
}

// servesVolume says whether this instance acts on pv: its node's volumes,
// shared volumes unless --node-local, and every node's with helper pods.
func (p *Provisioner) servesVolume(pv *corev1.PersistentVolume) bool {
	shared := pv.Annotations[AnnShared] == "true" && !p.cfg.NodeLocal
	return pv.Annotations[AnnNode] == p.cfg.Node || shared || p.anyNode
}

// ExpandVolume implements resize.Expander: the volume's path must have the
// room for the new size besides the volume itself (holdExpansion, which
// holds it until the PV shows the new capacity), and a volume made with a
// size limit gets the new size as its limit.
func (p *Provisioner) ExpandVolume(_ context.Context, pv *corev1.PersistentVolume, newBytes int64) error {
	if !p.OwnsVolume(pv) {
		return fmt.Errorf("volume %s is not served by this instance (node %s)", pv.Name, p.cfg.Node)
	}
	root, err := p.holdExpansion(pv, newBytes)
	if err != nil {
		if errors.Is(err, ErrNoRoom) {
			return fmt.Errorf("%w: %w", resize.ErrDoesNotFit, err)
		}
		return err
	}
	limiter, ok := p.cfg.Dirs.(Limiter)
	if !ok {
		return nil
	}
	rel, err := volumeRel(pv)
	if err != nil {
		return err
	}
	if err := limiter.SetLimit(root, rel, newBytes); err != nil {
		return fmt.Errorf("raising the size limit of %s to %s: %w", filepath.Join(root, rel), bytesString(newBytes), err)
	}
	return nil
}
