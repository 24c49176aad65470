// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package resize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
)

// sync brings the expansion of the claim key one step on, reading the claim
// and its PV from the listers. It returns an error only when a retry can
// help.
func (r *Resizer) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this Resizer queued: nothing to retry
	}
	claim, err := r.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pv, err := r.volumeOf(claim)
	if pv == nil || err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "volume", klog.KObj(pv))
	ctx = klog.NewContext(ctx, logger)
	request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if refused(claim, request) {
		logger.V(4).Info("Request was refused as infeasible; waiting for it to change", "request", request.String())
		return nil
	}
	if size := pv.Spec.Capacity[corev1.ResourceStorage]; size.Cmp(request) >= 0 {
		// The PV has the size already (a restart between the PV's write
		// and the claim's): only the claim's status is left.
		logger.V(2).Info("Volume has the requested size already; finishing the claim", "capacity", size.String())
		return r.finish(ctx, claim, size)
	}
	return r.expand(ctx, claim, pv, request)
}

// volumeOf returns the PV of claim when claim wants more storage and the PV
// is one this Resizer resizes; nil otherwise.
func (r *Resizer) volumeOf(claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	if !wantsMore(claim) {
		return nil, nil
	}
	pv, err := r.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil, nil // its arrival in the cache queues the claim again
	}
	if err != nil {
		return nil, err
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
		return nil, nil
	}
	if r.cfg.provisioners != nil && !r.cfg.provisioners[pv.Annotations[controller.AnnProvisionedBy]] {
		return nil, nil
	}
	if !r.expander.OwnsVolume(pv) {
		return nil, nil
	}
	return pv, nil
}

// refused says whether this very request was found infeasible before: it
// is final until the user changes the request.
func refused(claim *corev1.PersistentVolumeClaim, request resource.Quantity) bool {
	allocated, ok := claim.Status.AllocatedResources[corev1.ResourceStorage]
	return ok && allocated.Cmp(request) == 0 &&
		claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible
}

// expand marks the claim, grows the volume, then records the new size on the
// PV and last on the claim.
func (r *Resizer) expand(ctx context.Context, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, request resource.Quantity) error {
	claim, err := r.markInProgress(ctx, claim, request)
	if err != nil {
		return fmt.Errorf("marking claim %s/%s as resizing: %w", claim.Namespace, claim.Name, err)
	}
	r.recorder.Eventf(claim, corev1.EventTypeNormal, EventResizing, "External resizer is resizing volume %s", pv.Name)
	err = r.callExpand(ctx, pv, request)
	if errors.Is(err, ErrDoesNotFit) {
		msg := fmt.Sprintf("volume %s cannot grow to %s: %v; ask for less (more than %s), or make room and change the request",
			pv.Name, request.String(), err, statusSize(claim))
		r.recorder.Event(claim, corev1.EventTypeWarning, EventResizeFailed, msg)
		return r.markInfeasible(ctx, claim, msg)
	}
	if err != nil {
		r.recorder.Eventf(claim, corev1.EventTypeWarning, EventResizeFailed, "resizing volume %s to %s failed, will retry: %v", pv.Name, request.String(), err)
		return fmt.Errorf("expanding volume %s to %s: %w", pv.Name, request.String(), err)
	}
	if err := r.setVolumeCapacity(ctx, pv, request); err != nil {
		return fmt.Errorf("recording the capacity %s on PV %s: %w", request.String(), pv.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Volume expanded", "capacity", request.String())
	return r.finish(ctx, claim, request)
}

// callExpand calls the Expander, bounded by the expand timeout.
func (r *Resizer) callExpand(ctx context.Context, pv *corev1.PersistentVolume, size resource.Quantity) error {
	if r.cfg.expandTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.expandTimeout)
		defer cancel()
	}
	return r.expander.ExpandVolume(ctx, pv, size.Value())
}

func statusSize(claim *corev1.PersistentVolumeClaim) string {
	size := claim.Status.Capacity[corev1.ResourceStorage]
	return size.String()
}

// markInProgress records on the claim that the controller's resize to
// request runs: allocatedResources, ControllerResizeInProgress and the
// Resizing condition. A claim marked so already is not written again.
func (r *Resizer) markInProgress(ctx context.Context, claim *corev1.PersistentVolumeClaim, request resource.Quantity) (*corev1.PersistentVolumeClaim, error) {
	allocated, ok := claim.Status.AllocatedResources[corev1.ResourceStorage]
	if ok && allocated.Cmp(request) == 0 &&
		claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInProgress &&
		hasCondition(claim, corev1.PersistentVolumeClaimResizing) {
		return claim, nil
	}
	resizing := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}
	return r.patchClaimStatus(ctx, claim, map[string]any{
		"allocatedResources":        map[string]any{string(corev1.ResourceStorage): request.String()},
		"allocatedResourceStatuses": map[string]any{string(corev1.ResourceStorage): corev1.PersistentVolumeClaimControllerResizeInProgress},
		"conditions":                mergeResizeConditions(claim.Status.Conditions, resizing),
	})
}

// markInfeasible records that the request cannot be met: final until the
// request changes.
func (r *Resizer) markInfeasible(ctx context.Context, claim *corev1.PersistentVolumeClaim, msg string) error {
	failed := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, Message: msg}
	_, err := r.patchClaimStatus(ctx, claim, map[string]any{
		"allocatedResourceStatuses": map[string]any{string(corev1.ResourceStorage): corev1.PersistentVolumeClaimControllerResizeInfeasible},
		"conditions":                mergeResizeConditions(claim.Status.Conditions, failed),
	})
	if err != nil {
		return fmt.Errorf("marking claim %s/%s as infeasible to resize: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

// finish records the new size in the claim's status and clears the resize's
// state and conditions.
func (r *Resizer) finish(ctx context.Context, claim *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	_, err := r.patchClaimStatus(ctx, claim, map[string]any{
		"capacity":                  map[string]any{string(corev1.ResourceStorage): size.String()},
		"allocatedResourceStatuses": map[string]any{string(corev1.ResourceStorage): nil},
		"conditions":                mergeResizeConditions(claim.Status.Conditions),
	})
	if err != nil {
		return fmt.Errorf("recording the size %s on claim %s/%s: %w", size.String(), claim.Namespace, claim.Name, err)
	}
	r.recorder.Eventf(claim, corev1.EventTypeNormal, EventResizeSuccessful, "Resize volume succeeded: %s", size.String())
	return nil
}

// setVolumeCapacity writes size into the PV's spec.capacity.
func (r *Resizer) setVolumeCapacity(ctx context.Context, pv *corev1.PersistentVolume, size resource.Quantity) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pv.ResourceVersion},
		"spec":     map[string]any{"capacity": map[string]any{string(corev1.ResourceStorage): size.String()}},
	})
	if err != nil {
		return err
	}
	_, err = r.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// patchClaimStatus merges status into the claim's status, on the condition
// that the claim is still the version read (a conflict is retried from the
// cache's newer copy).
func (r *Resizer) patchClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, status map[string]any) (*corev1.PersistentVolumeClaim, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": claim.ResourceVersion},
		"status":   status,
	})
	if err != nil {
		return claim, err
	}
	updated, err := r.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return claim, err
	}
	return updated, nil
}

// resizeConditions are the claim conditions an expansion sets; the others
// (ModifyingVolume, ...) belong to other controllers and are kept.
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// mergeResizeConditions returns the claim's conditions with its resize
// conditions replaced by set. A condition that keeps its status keeps its
// lastTransitionTime.
func mergeResizeConditions(existing []corev1.PersistentVolumeClaimCondition, set ...corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	out := []corev1.PersistentVolumeClaimCondition{}
	old := map[corev1.PersistentVolumeClaimConditionType]corev1.PersistentVolumeClaimCondition{}
	for _, c := range existing {
		if resizeConditions[c.Type] {
			old[c.Type] = c
			continue
		}
		out = append(out, c)
	}
	now := metav1.Now()
	for _, c := range set {
		c.LastProbeTime = now
		c.LastTransitionTime = now
		if prev, ok := old[c.Type]; ok && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

func hasCondition(claim *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, c := range claim.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
