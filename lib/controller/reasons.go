// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import "github.com/kubeprov/external-storage/lib/internal/events"

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
