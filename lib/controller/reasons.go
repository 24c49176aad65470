// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/kubeprov/external-storage/lib/internal/events"
	corev1 "k8s.io/api/core/v1"
)

// Event reasons, the ones users of the established provisioners grep for.
const (
	EventProvisioning          = events.Provisioning          // "Provisioning"
	EventProvisioningSucceeded = events.ProvisioningSucceeded // "ProvisioningSucceeded"
	EventProvisioningFailed    = "ProvisioningFailed"
	EventProvisioningCleanup   = "ProvisioningCleanupFailed"
	// EventProvisioningCleanupSkipped: the operation of a deleted claim is
	// left as it is, because finishing it would act on a guess.
	EventProvisioningCleanupSkipped = "ProvisioningCleanupSkipped"
	EventVolumeFailedDelete         = "VolumeFailedDelete"
)

// claimEvent queues an event about claim; className names its storage
// class, for aggregation.
func (c *ProvisionController) claimEvent(claim *corev1.PersistentVolumeClaim, className, eventType, reason, format string, args ...any) {
	c.events.Event(events.ClaimReference(claim), className, eventType, reason, format, args...)
}

// claimFailed tells the user why their claim has no volume (yet): the
// Warning ProvisioningFailed event.
func (c *ProvisionController) claimFailed(claim *corev1.PersistentVolumeClaim, className, format string, args ...any) {
	c.claimEvent(claim, className, corev1.EventTypeWarning, EventProvisioningFailed, format, args...)
}
