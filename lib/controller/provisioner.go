// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Provisioner creates and deletes the storage asset behind a PersistentVolume.
// It is the whole contract between a provisioner and the ProvisionController;
// extra capabilities are optional interfaces (Qualifier, RetryingQualifier,
// DeletionGuard, BlockProvisioner, DataSourceProvisioner, ClaimMetadataReader,
// RecordedAssetDeleter, SelectedNodeReader) found by type assertion.
type Provisioner interface {
	// Provision creates the asset for options.PVC and returns the PV that
	// represents it. The PV should be built with options.NewVolume so that claim
	// reference, class, access modes, capacity and reclaim policy are right.
	//
	// Provision must be idempotent for one options.PVName: after a restart or a
	// lost answer the controller calls it again and expects the same asset, not
	// a second one.
	//
	// With a nil error the state is ignored. With an error the state says what
	// the controller must assume about the asset (see ProvisioningState).
	// Return an IgnoredError to stop quietly (for example: another instance
	// owns this claim).
	Provision(ctx context.Context, options ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error)

	// Delete removes the asset behind pv. An asset that is already gone is
	// success. Return an IgnoredError when this instance does not own the
	// asset: the PV is then left alone for its owner.
	Delete(ctx context.Context, pv *corev1.PersistentVolume) error
}

// ProvisioningState tells the controller, after a failed Provision, whether an
// asset may exist.
type ProvisioningState string

const (
	// ProvisioningFinished: the operation is over; no asset exists. The claim is
	// retried with backoff (after a Warning event) until the failure threshold.
	ProvisioningFinished ProvisioningState = "Finished"
	// ProvisioningInBackground: the operation may still complete (a timeout, a
	// lost connection). The controller keeps calling Provision for the same PV
	// name, even after the claim is deleted, and deletes the asset once Provision
	// returns it for a claim that is gone.
	ProvisioningInBackground ProvisioningState = "Background" // the value sig-storage-lib-external-provisioner uses
	// ProvisioningNoChange: nothing happened; whatever was true before this call
	// (in particular an earlier InBackground) still holds. An empty or unknown
	// state with an error is read as NoChange.
	ProvisioningNoChange ProvisioningState = "NoChange"
	// ProvisioningReschedule: the selected node cannot host the volume; the
	// controller removes the selected-node annotation so that the scheduler
	// picks another node. No asset exists.
	ProvisioningReschedule ProvisioningState = "Reschedule"
)

// ProvisionOptions is everything Provision needs to know about one claim.
type ProvisionOptions struct {
	// StorageClass is the claim's class, as it is in the informer cache: do not modify.
	StorageClass *storagev1.StorageClass
	// PVName is the name the PV must have.
	PVName string
	// PVC is the claim being provisioned: do not modify.
	PVC *corev1.PersistentVolumeClaim
	// SelectedNodeName is the node chosen by the scheduler for
	// WaitForFirstConsumer classes, empty for Immediate ones.
	SelectedNodeName string
	// SelectedNode is that node, from the controller's cache, for
	// provisioners that implement SelectedNodeReader (nil for others, for
	// Immediate classes, and when finishing the operation of a deleted claim
	// whose node is gone too): do not modify.
	SelectedNode *corev1.Node
	// RecordAssetID is set for provisioners that implement
	// RecordedAssetDeleter (nil for others): call it with the ID the backend
	// gave the asset as soon as the backend has answered, before anything
	// else can fail. The ID is kept in the operation's in-flight journal
	// entry (written at once; Provision does not wait for it), so that
	// after a restart the operation of a claim that is gone is finished by
	// deleting that asset, never by creating it again. IDs longer than
	// MaxRecordedAssetIDLength are not kept.
	RecordAssetID func(id string)
}

// MaxRecordedAssetIDLength bounds an ID given to ProvisionOptions.RecordAssetID.
const MaxRecordedAssetIDLength = 1024

// Qualifier is implemented by provisioners that can cheaply tell, before any
// work, that a claim is not theirs to provision (for example: node-local
// provisioners that serve only their own node). A claim that does not qualify
// is skipped silently: no event, no retry.
type Qualifier interface {
	ShouldProvision(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool
}

// RetryingQualifier is a Qualifier whose answer can change with time alone,
// not only when the claim changes: for example instances of a provisioner,
// one per node, that each wait a while before they compete for a claim. The
// controller calls QualifyClaim instead of ShouldProvision. A claim that does
// not qualify is skipped silently, as with Qualifier; with retryAfter > 0
// the controller looks at it again after that delay (no event, no failure
// counted), and earlier whenever the claim changes.
type RetryingQualifier interface {
	Qualifier
	QualifyClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (ok bool, retryAfter time.Duration)
}

// DeletionGuard is implemented by provisioners that must veto the deletion of
// some volumes (for example volumes owned by another instance).
type DeletionGuard interface {
	ShouldDelete(ctx context.Context, pv *corev1.PersistentVolume) bool
}

// BlockProvisioner is implemented by provisioners that can serve claims with
// volumeMode Block. Without it, such claims get a Warning event.
type BlockProvisioner interface {
	SupportsBlock(ctx context.Context) bool
}

// DataSourceProvisioner is implemented by provisioners that fill a new volume
// from the claim's data source (spec.dataSource / spec.dataSourceRef: a clone,
// a snapshot, a populator). Without it, or when SupportsDataSource says no,
// such claims get a Warning event and no volume: an empty volume where the
// user asked for their data would look like success and lose it.
type DataSourceProvisioner interface {
	SupportsDataSource(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool
}

// ClaimMetadataReader is implemented by provisioners whose Provision reads
// labels or annotations of the claim (for example to name the asset). The
// in-flight journal, which lets a restarted controller finish the operation of
// a deleted claim, keeps of a claim only its identity, its spec and these
// keys: claim metadata is written by tenants, and unbounded copies of it
// would let one namespace fill the journal for everyone. Provision must not
// depend on other labels or annotations, or a Provision repeated after a
// restart may not find the asset it created.
type ClaimMetadataReader interface {
	// ClaimMetadataKeys returns the label and annotation keys Provision reads
	// for claims of class.
	ClaimMetadataKeys(class *storagev1.StorageClass) (labels, annotations []string)
}

// RecordedAssetDeleter is implemented by provisioners that can delete an
// asset by the ID the backend gave it (a CSI volume ID), recorded with
// ProvisionOptions.RecordAssetID. After a restart, the operation of a claim
// that was deleted before its PV was saved is finished with
// DeleteRecordedAsset instead of a second Provision and a Delete: if another
// provisioner took over meanwhile, served the claim and deleted its asset,
// a second Provision would create that asset again (a phantom volume, and a
// leak if the Delete then fails).
type RecordedAssetDeleter interface {
	// DeleteRecordedAsset deletes the asset known as assetID that Provision
	// made for options (the claim and class as the journal recorded them).
	// An asset that is already gone is success.
	DeleteRecordedAsset(ctx context.Context, options ProvisionOptions, assetID string) error
}

// SelectedNodeReader is implemented by provisioners whose Provision reads the
// node the scheduler selected (its labels, for topology or node affinity).
// When ReadsSelectedNode is true the controller keeps a cache of Nodes (only
// then: a cluster's Nodes cost memory) and fills ProvisionOptions.SelectedNode,
// so that no provisioner needs a live GET per claim; and when the selected
// node no longer exists it asks the scheduler for another one itself, with a
// Warning event on the claim, without calling Provision. Its RBAC must allow
// get, list and watch on nodes.
type SelectedNodeReader interface {
	ReadsSelectedNode() bool
}

// IgnoredError tells the controller to stop without an error event: from
// Provision, the claim is not this instance's to serve; from Delete, this
// instance does not own the asset and the PV is left alone.
type IgnoredError struct {
	Reason string
}

func (e *IgnoredError) Error() string { return fmt.Sprintf("ignored: %s", e.Reason) }

// Ignore returns an IgnoredError with the given reason.
func Ignore(format string, args ...any) error {
	return &IgnoredError{Reason: fmt.Sprintf(format, args...)}
}

// IsIgnored reports whether err is, or wraps, an IgnoredError.
func IsIgnored(err error) bool {
	var ignored *IgnoredError
	return errors.As(err, &ignored)
}

// PermanentError marks a Provision failure that retrying cannot fix (for
// example a backend that does not support what the class asks for): the
// controller reports it once in a ProvisioningFailed event and does not retry
// until the claim changes or the controller restarts.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a PermanentError.
func IsPermanent(err error) bool {
	var permanent *PermanentError
	return errors.As(err, &permanent)
}
