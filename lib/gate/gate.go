// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package gate is the one rule set that every decision to delete, overwrite,
// hand out or map storage goes through, in lib and in the provisioners. Each
// rule says what must be true before the action and from which source only
// the provisioner controls it may learn that; what others can write (a
// ConfigMap, a PV's or a claim's annotations, a pod with the name the
// provisioner would give its own, a Secret someone created before the
// provisioner did) is a claim to check, never a fact to act on.
//
// A rule is a function with plain inputs, each documented with the source
// it must come from, and returns nil or a *Refusal naming the rule and
// saying why. The caller does nothing destructive on a refusal and tells
// the user (a Warning event, a log line) with Refusal.Reason. A new kind of
// destructive decision gets a rule here, not a check beside the code that
// makes it.
package gate

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Rule names one rule of the gate, for logs, events and errors.As.
type Rule string

const (
	// RuleSealedSecret: a key Secret is used only when it names its own UID
	// (SealedSecret).
	RuleSealedSecret Rule = "sealed-secret"
	// RuleFreshEntry: a journal entry is acted on only when it is signed
	// over the journal's current generation (FreshEntry).
	RuleFreshEntry Rule = "fresh-entry"
	// RuleWholeRecord: an operation is finished again only with every
	// claim label and annotation Provision may have read (FinishOrphan).
	RuleWholeRecord Rule = "whole-record"
	// RuleKeepRetained: an asset of a class that keeps volumes is never
	// deleted on resume (FinishOrphan).
	RuleKeepRetained Rule = "keep-retained"
	// RuleSameLeaseTerm: nothing is provisioned again for a claim another
	// Lease holder may have served (FinishOrphan).
	RuleSameLeaseTerm Rule = "same-lease-term"
	// RuleReleasedForDelete: a PV's asset is deleted only when the PV is
	// released and its reclaim policy is Delete (DeleteVolume).
	RuleReleasedForDelete Rule = "released-for-delete"
	// RuleSameIntent: an existing pod is used only when it runs exactly
	// what the provisioner would create (AdoptPod).
	RuleSameIntent Rule = "same-intent"
	// RuleEmptyDirectory: a directory a claim's values named is handed to
	// a new volume only when it is empty (HandOutDirectory).
	RuleEmptyDirectory Rule = "empty-directory"
	// RuleOwnSnapshot: a finalizer other provisioners also use is removed
	// only from an object of the provisioner's own driver (SweepFinalizer).
	RuleOwnSnapshot Rule = "own-snapshot"
	// RuleOneAssetPerVolume: of the assets made for one volume, only those
	// the volume does not use, and nothing else uses, are deleted as
	// duplicates (DeleteDuplicate).
	RuleOneAssetPerVolume Rule = "one-asset-per-volume"
)

// Refusal is a rule's answer when the action must not happen.
type Refusal struct {
	Rule   Rule
	Reason string
}

func (r *Refusal) Error() string { return fmt.Sprintf("refused by rule %s: %s", r.Rule, r.Reason) }

// Refused returns the rule that refused err, "" when err is no Refusal.
func Refused(err error) Rule {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Rule
	}
	return ""
}

func refuse(rule Rule, format string, args ...any) error {
	return &Refusal{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// SealAnnotation, on a key Secret, holds the Secret's own UID. The API
// server gives an object its UID when it is created, so no one can write
// the UID into the object they create: it can only be added afterwards, by
// an update. The provisioner adds it right after it created the Secret
// (lib/recordkey); an admin upgrading from a version that did not may add it
// to a Secret they know the provisioner made. Whoever may only create
// Secrets in the provisioner's namespace (not update them) cannot make a
// Secret that passes.
const SealAnnotation = "kubeprov.io/sealed-uid"

// SealedSecret is the rule for a Secret holding a key the provisioner signs
// its records with (the journal's, flex's pod records): it is used only if
// it carries SealAnnotation equal to its own metadata.uid.
//
// Source: the Secret as the API server returns it. Kubernetes records no
// creator that a client cannot forge (managedFields, labels, owner
// references are all client-supplied); the server-assigned UID, written
// back by an update, is what proves that someone with update rights on the
// Secret vouched for it after its creation.
func SealedSecret(s *corev1.Secret) error {
	switch got, ok := s.Annotations[SealAnnotation]; {
	case !ok:
		return refuse(RuleSealedSecret, "Secret %s/%s was not created by the provisioner (it lacks annotation %s, written right after the provisioner creates it): someone else may have made it with a key they know. If it is the provisioner's own from an earlier version, annotate it with its UID (kubectl annotate secret -n %s %s %s=$(kubectl get secret -n %s %s -o jsonpath='{.metadata.uid}')); otherwise delete it and restart the provisioner",
			s.Namespace, s.Name, SealAnnotation, s.Namespace, s.Name, SealAnnotation, s.Namespace, s.Name)
	case got != string(s.UID):
		return refuse(RuleSealedSecret, "Secret %s/%s carries annotation %s of another object: it was not created by the provisioner; delete it and restart the provisioner",
			s.Namespace, s.Name, SealAnnotation)
	}
	return nil
}

// Entry is what is known of a journal entry read at start.
type Entry struct {
	// Signed: the entry carries a signature. Source: the entry.
	Signed bool
	// Current: the signature verifies with the key of a sealed Secret
	// (SealedSecret) over the entry and the journal's current generation,
	// kept in that same Secret. Source: the key Secret, which only the
	// provisioner updates.
	Current bool
	// Earlier: the signature verifies over an earlier generation: the
	// entry was genuine once, and the journal has written completions
	// since. Source: as Current.
	Earlier bool
	// Generation is the journal's current generation, for the message.
	Generation uint64
	// KeySecret names the key Secret, for the message.
	KeySecret string
}

// FreshEntry is the rule for acting on a journal entry at all. A signature
// proves origin, not freshness: whoever can read and write the journal's
// ConfigMap can keep a genuine entry and write it back after the operation
// it describes finished. The journal's generation, in the key Secret, moves
// on before any completion is written, and every live entry is signed again
// over the new one, so an entry older than the last completion written no
// longer verifies.
func FreshEntry(e Entry) error {
	switch {
	case e.Current:
		return nil
	case !e.Signed:
		return refuse(RuleFreshEntry, "it is not signed: an earlier version of the provisioner, or someone else, wrote it")
	case e.Earlier:
		return refuse(RuleFreshEntry, "it was signed before the journal's generation %d (Secret %s): it is older than the last completions the journal wrote, so it was replayed, or left by a crash between two writes",
			e.Generation, e.KeySecret)
	}
	return refuse(RuleFreshEntry, "its signature does not verify with the key and generation %d in Secret %s: someone else wrote or changed it, or the key was replaced", e.Generation, e.KeySecret)
}

// Orphan is what is known of an operation resumed from the journal whose
// claim is gone and whose PV does not exist, which finishing would delete.
// The entry passed FreshEntry.
type Orphan struct {
	// ClaimIncomplete: the recorded claim lacks labels or annotations
	// Provision may have read. Source: the signed entry.
	ClaimIncomplete bool
	// Recorded is the class as the entry recorded it (source: the signed
	// entry), Current the class as the API server has it now (nil when it
	// is gone).
	Recorded, Current *storagev1.StorageClass
	// LeaseChange says how the leader Lease shows that another identity
	// held it since the entry was written; "" when nothing shows that.
	// Source: the Lease, which only the provisioner's instances update,
	// and the term recorded in the signed entry.
	LeaseChange string
	// AssetIDRecorded: the entry records the backend's ID of the asset.
	// Source: the signed entry.
	AssetIDRecorded bool
}

// FinishOrphan is the rule for deleting the asset of an operation resumed
// from the journal whose claim is gone: by its recorded ID, or by
// provisioning again (Provision is idempotent) and deleting what that
// returns. It refuses
//
//   - when the recorded claim is incomplete: a repeated Provision may
//     return another claim's asset (RuleWholeRecord);
//   - when either class keeps volumes (reclaimPolicy Retain), whoever held
//     the Lease and without leader election: the asset may be one that was
//     saved as a PV and kept by an admin who deleted that PV
//     (RuleKeepRetained);
//   - without a recorded ID, when another Lease holder may have served the
//     claim: a second Provision would make its asset again
//     (RuleSameLeaseTerm).
func FinishOrphan(o Orphan) error {
	switch {
	case o.ClaimIncomplete:
		return refuse(RuleWholeRecord, "the recorded claim lacks labels or annotations Provision may have read, so it cannot be asked for the same asset again")
	case retains(o.Recorded) || retains(o.Current):
		return refuse(RuleKeepRetained, "StorageClass %s keeps volumes (reclaimPolicy Retain): the asset may be one that was saved as a PV and kept by an admin who deleted that PV", className(o.Recorded, o.Current))
	case !o.AssetIDRecorded && o.LeaseChange != "":
		return refuse(RuleSameLeaseTerm, "%s; no asset ID was recorded, so it cannot be deleted without provisioning it again", o.LeaseChange)
	}
	return nil
}

func retains(class *storagev1.StorageClass) bool {
	return class != nil && class.ReclaimPolicy != nil && *class.ReclaimPolicy == corev1.PersistentVolumeReclaimRetain
}

func className(classes ...*storagev1.StorageClass) string {
	for _, c := range classes {
		if c != nil {
			return c.Name
		}
	}
	return ""
}

// DeleteVolume is the rule for deleting the asset of a PV the provisioner
// serves: its reclaim policy is Delete, and it is Released, or it is being
// deleted, is not Bound and the provisioner's finalizer still holds it
// (deleting the PV object first still deletes the asset, as
// external-provisioner does). holdsFinalizer says whether one of the
// provisioner's finalizers is on the PV.
//
// Source: the PV as the API server has it: its phase, set by
// kube-controller-manager, and its reclaim policy. Its annotations (which
// asset, which node) are claims the provisioner's Delete checks against the
// asset itself before it touches it.
func DeleteVolume(pv *corev1.PersistentVolume, holdsFinalizer bool) error {
	switch {
	case pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete:
		return refuse(RuleReleasedForDelete, "PV %s has reclaim policy %q, not Delete", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
	case pv.DeletionTimestamp == nil && pv.Status.Phase != corev1.VolumeReleased:
		return refuse(RuleReleasedForDelete, "PV %s is %s, not Released", pv.Name, pv.Status.Phase)
	case pv.DeletionTimestamp != nil && (!holdsFinalizer || pv.Status.Phase == corev1.VolumeBound):
		return refuse(RuleReleasedForDelete, "PV %s is being deleted while Bound, or without the provisioner's finalizer", pv.Name)
	}
	return nil
}

// AdoptPod is the rule for using a pod that already exists under the name
// the provisioner would give its own (a helper or driver pod) instead of
// creating it: mismatch, the first part of the pod that is not what the
// provisioner would create now (lib/podrun Mismatch), must be empty.
//
// Source: the pod as the API server stores it, compared field by field
// with the pod the provisioner builds; whoever can create pods in the
// namespace can plant one with the right name, labels and owner.
func AdoptPod(mismatch string) error {
	if mismatch != "" {
		return refuse(RuleSameIntent, "its %s is not what the provisioner would create", mismatch)
	}
	return nil
}

// HandOutDirectory is the rule for giving a directory that already exists
// to a new volume. One named by the volume itself (namedByVolume: hostpath's
// pvc-<claim UID>) is that volume's, made by an earlier attempt, and is
// resumed as it is; one whose name a claim's values chose (a path pattern)
// is handed out only when it holds nothing (entries, the names it holds,
// is 0), since it may hold a deleted volume's retained data or another
// volume's.
//
// Source: the directory itself, read on the node without following links
// (lib/nofollow), by the built-in helper and by the check before a setup
// script alike; never a PV's annotation.
func HandOutDirectory(dir string, namedByVolume bool, entries int) error {
	if !namedByVolume && entries > 0 {
		return refuse(RuleEmptyDirectory, "%s exists and is not empty: it may hold a deleted volume's retained data or another volume's", dir)
	}
	return nil
}

// SweepFinalizer is the rule for removing a finalizer that the provisioner
// shares by name with others (the CSI sidecar's VolumeSnapshot protection)
// from an object none of its operations uses: only from an object of its
// own driver, since another driver's provisioner may be using that object
// right now. object is the object's namespace/name; boundTo and driver say
// whose it is, ours is the provisioner's driver.
//
// Source: the object that records ownership and that the object's users
// cannot edit; for a VolumeSnapshot, its VolumeSnapshotContent
// (cluster-scoped, written by the snapshot controller or an admin): its
// spec.volumeSnapshotRef as boundTo and spec.driver as driver, both ""
// when there is no content. Never the snapshot's own annotations or spec.
func SweepFinalizer(object, boundTo, driver, ours string) error {
	switch {
	case boundTo != object:
		return refuse(RuleOwnSnapshot, "%s has no content bound to it (content refers to %q)", object, boundTo)
	case driver != ours:
		return refuse(RuleOwnSnapshot, "%s belongs to driver %q, not %q", object, driver, ours)
	}
	return nil
}

// Duplicate is what is known of an asset found beside the one a volume
// uses, under the same name.
type Duplicate struct {
	// Asset is the duplicate's ID on the backend.
	Asset string
	// MadeFor is the volume the asset's own metadata says it was made for,
	// written by this provisioner when it created the asset; "" when that
	// metadata names another provisioner or no volume.
	MadeFor string
	// Volume is the PV both assets are named after.
	Volume string
	// Kept is the asset the volume uses: the one its PV records, or the one
	// Provision is about to return.
	Kept string
	// InUse says the backend reports the asset attached or in use by
	// something other than this provisioner's own connection.
	InUse bool
}

// DeleteDuplicate is the rule for deleting a second asset made for one
// volume. A create whose answer never came (the replica was killed, the
// request timed out) may be carried out after a retry has looked for it and
// made another; the first is then nobody's and would be leaked. It may be
// deleted when its own metadata says this provisioner made it for this
// volume, the volume uses another asset, and nothing uses it.
//
// Source: the asset as the backend reports it (its metadata and its
// state); Kept from the PV's record or from Provision's own answer. Never
// the asset's name alone: anyone may name a volume after a PV.
func DeleteDuplicate(d Duplicate) error {
	switch {
	case d.Kept == "":
		return refuse(RuleOneAssetPerVolume, "%s: no asset of volume %s is known to be kept", d.Asset, d.Volume)
	case d.Asset == d.Kept:
		return refuse(RuleOneAssetPerVolume, "%s is the asset volume %s uses", d.Asset, d.Volume)
	case d.MadeFor != d.Volume:
		return refuse(RuleOneAssetPerVolume, "%s was not made by this provisioner for volume %s (its metadata says %q)", d.Asset, d.Volume, d.MadeFor)
	case d.InUse:
		return refuse(RuleOneAssetPerVolume, "%s is in use", d.Asset)
	}
	return nil
}
