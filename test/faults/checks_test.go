// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

// checkDuplicates fails the case for every claim that more than one PV
// names: a provisioner that lost track of an operation and redid it.
func (e *env) checkDuplicates() {
	e.t.Helper()
	for uid, pvs := range e.claimsWithPV() {
		if len(pvs) > 1 {
			e.t.Errorf("claim %s has %d PVs: %s", e.claimOf(uid), len(pvs), strings.Join(pvs, ", "))
		}
	}
}

// claimOf names the claim of a UID for messages.
func (e *env) claimOf(uid types.UID) string {
	for _, name := range e.claimNames() {
		if e.uid(name) == uid {
			return e.ns + "/" + name
		}
	}
	return fmt.Sprintf("with UID %v (not of this burst)", uid)
}

// checkAssets fails the case unless the backend's assets and the class's
// PVs agree one to one (within assetsTimeout: an asset and its PV are
// created and removed one after the other).
func (e *env) checkAssets(when string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, assetsTimeout)
	defer cancel()
	if err := backend.WaitForAssets(ctx, e.b, e.client, e.class); err != nil {
		e.t.Errorf("%s, the %s assets and the PVs disagree: %v", when, e.b.Name(), err)
	}
}

// deleteAllClaims deletes the live claims and checks that every PV of the
// class goes (none stuck Terminating or Released) and every asset with it.
func (e *env) deleteAllClaims() {
	e.t.Helper()
	for _, name := range e.claimNames() {
		if !e.isDeleted(name) {
			if err := e.deleteClaim(name); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, deleteTimeout, true, func(context.Context) (bool, error) {
		return len(e.volumes()) == 0, nil
	})
	if err != nil {
		e.t.Errorf("%d PVs of class %s remain %s after their claims were deleted:\n%s", len(e.volumes()), e.class, deleteTimeout, e.describeVolumes())
	}
	var assets []string
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, assetsTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		assets, err = e.b.Assets(ctx)
		return err == nil && len(assets) == 0, nil
	})
	if err != nil {
		e.t.Errorf("%d %s assets remain after every claim was deleted (leaked): %s", len(assets), e.b.Name(), strings.Join(assets, ", "))
	}
}

// describeVolumes renders the class's PVs with their events.
func (e *env) describeVolumes() string {
	var lines []string
	for _, pv := range e.volumes() {
		claim := "none"
		if ref := pv.Spec.ClaimRef; ref != nil {
			claim = ref.Namespace + "/" + ref.Name
		}
		deleting := ""
		if pv.DeletionTimestamp != nil {
			deleting = fmt.Sprintf(", Terminating since %s", pv.DeletionTimestamp.Format(time.TimeOnly))
		}
		events, _ := e.describeEvents(pv)
		lines = append(lines, fmt.Sprintf("  PV %s: %s, claim %s, asset %q, finalizers %v%s%s",
			pv.Name, pv.Status.Phase, claim, e.b.AssetOf(pv), pv.Finalizers, deleting, events))
	}
	return strings.Join(lines, "\n")
}

// waitForWarning returns the first Warning event in the case's namespace,
// or nil if none comes within hold.
func (e *env) waitForWarning(hold time.Duration) *corev1.Event {
	var found *corev1.Event
	_ = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, hold, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String(),
		})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		found = &list.Items[0]
		return true, nil
	})
	return found
}

// removeLeftovers deletes what a case that stopped early left behind (the
// claims, and through them the PVs and assets) while the replicas still run,
// so that the next case starts from a clean cluster.
func (e *env) removeLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
	defer cancel()
	err := e.client.CoreV1().PersistentVolumeClaims(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("cleanup: deleting the claims: %v", err)
		return
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(e.volumes()) == 0, nil
	})
	if err != nil {
		e.t.Logf("cleanup: PVs left behind:\n%s", e.describeVolumes())
	}
}

// stopReplicas stops the replicas still running; one that had exited by
// itself (a crash) fails the case.
func (e *env) stopReplicas() {
	e.mu.Lock()
	started := slices.Clone(e.started)
	e.mu.Unlock()
	for _, p := range started {
		if err := p.Stop(); err != nil {
			e.t.Errorf("replica: %v", err)
		}
	}
}

// showLogsIfFailed shows the end of every replica's log when the case
// failed.
func (e *env) showLogsIfFailed() {
	if !e.t.Failed() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.started {
		e.t.Logf("last %d lines of %s (pid %d, %s):\n%s", logLines, p.Name, p.Pid(), p.LogPath, p.LogTail(logLines))
	}
}
