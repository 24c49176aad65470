// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller is the engine of an external PersistentVolume
// provisioner: it watches claims whose StorageClass names your provisioner,
// calls your Provisioner to create the storage asset, saves the
// PersistentVolume that kube-controller-manager binds to the claim, and, when
// a released volume's reclaim policy is Delete, calls your Provisioner to
// delete the asset and then removes the PV.
//
// A provisioner implements two methods (Provisioner, in provisioner.go) and,
// when it needs them, optional ones found by type assertion (Qualifier,
// RetryingQualifier, DeletionGuard, BlockProvisioner, DataSourceProvisioner,
// ClaimMetadataReader, SelectedNodeReader, RecordedAssetDeleter).
// ProvisionOptions.NewVolume builds a correct PV from the claim and class so
// that only the volume source is the provisioner's job.
//
// What the controller guarantees:
//
//   - No leaked assets. Before Provision is called the operation is recorded
//     in a journal ConfigMap (WithJournal); it is cleared once the PV is
//     saved or the asset deleted. A claim deleted while Provision runs, or a
//     controller killed before the PV is saved, ends with Provision called
//     again (it must be idempotent) and Delete called on the result. Never
//     on a guess: after a restart only entries signed with the provisioner's
//     key (Secret JournalKeySecret) are acted on, and an operation whose
//     recorded claim lacks metadata Provision may read (no
//     ClaimMetadataReader) is left, its entry kept and a Warning event
//     (EventProvisioningCleanupSkipped) naming the volume. Nothing is
//     created again that someone else may have finished with: an asset ID
//     recorded in the entry (RecordedAssetDeleter) is deleted by that ID,
//     and an operation without one is left in the same way when the leader
//     Lease shows that another identity held it since the entry was written.
//   - Honest retries: per-item exponential backoff between WithRetryInterval
//     bounds, a failure threshold that really stops (with a Warning event)
//     and is re-armed only by a change of the object, never by a resync.
//     Operations that may still complete (ProvisioningInBackground) are
//     retried until they finish, even after their claim is gone.
//   - Workers never block on the API: a PV that cannot be saved is retried
//     in the background until the API server answers.
//   - Events a user can act on, on the claim (ProvisioningFailed names the
//     problem); in bursts, Normal events are aggregated on the StorageClass
//     so that they never cost more API writes than the volumes.
//   - No globals: metrics go to the registry you pass (or a private one),
//     nothing exits the process, several controllers can share a process.
//
// The loop follows kubernetes/sample-controller: Run starts informers and
// workers; each worker takes a key from a named, typed work queue and calls
// syncClaim, syncVolume or syncSave, which read from the informer caches and
// ask the API server only where a lagging cache could lose data (see
// docs/architecture.md). The state they share is in small types with their
// own locks: operations (in-flight provisionings), failures (retry counts
// by object), pendingSaves, deletedVolumes, and the journal.
//
// Defaults follow sig-storage-lib-external-provisioner where that is safe
// (docs/migrating.md lists every difference): in a pod, the journal and the
// leader Lease live in the pod's namespace and leader election is on.
package controller
