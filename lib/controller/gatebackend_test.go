// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// gateAsset is one volume of the model's backend.
type gateAsset struct {
	id, name string
	claim    types.UID // the claim it was created for
	retain   bool      // its class kept volumes (reclaimPolicy Retain)
	creator  string
	deleted  bool
}

// gateBackend is the model's storage backend, shaped like a CSI driver
// behind the controller: CreateVolume is idempotent by name (the PV name),
// each volume has an ID, the ID is recorded with RecordAssetID and deletes
// go by it. It records every asset it creates and deletes, checks the
// invariants at the moment of each call, and injects the faults the model
// chooses (a timeout, a lost answer, a kill around the answer).
type gateBackend struct {
	w *gateWorld

	mu     sync.Mutex
	seq    int
	assets map[string]*gateAsset // by ID
}

var (
	_ Provisioner          = (*gateBackend)(nil)
	_ RecordedAssetDeleter = (*gateBackend)(nil)
	_ ClaimMetadataReader  = (*gateBackend)(nil)
)

// Faults of one CreateVolume, chosen by the model.
const (
	faultNone             = iota
	faultRefused          // fails, nothing created: ProvisioningFinished
	faultTimeout          // times out before the backend did anything: InBackground
	faultLostAnswer       // created, the answer lost (a timeout): InBackground
	faultKillBeforeRecord // created and answered; the process dies before the ID reaches the journal
	faultKillAfterRecord  // created, ID in the journal; the process dies before the PV is saved
	numFaults
)

var faultNames = [numFaults]string{"ok", "refused", "timeout", "lost answer", "killed between answer and record", "killed after record"}

var (
	errGateTimeout = errors.New("CreateVolume timed out")
	errGateKilled  = errors.New("the process was killed")
)

func newGateBackend(w *gateWorld) *gateBackend {
	return &gateBackend{w: w, assets: map[string]*gateAsset{}}
}

// ClaimMetadataKeys: the backend reads nothing of a claim's metadata.
func (b *gateBackend) ClaimMetadataKeys(*storagev1.StorageClass) (labels, annotations []string) {
	return nil, []string{"example.com/tier"}
}

func (b *gateBackend) Provision(ctx context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	w := b.w
	uid := o.PVC.UID
	w.checkCreateFor(uid, o.PVName)
	fault := w.chooseFault()
	w.note(fmt.Sprintf("CreateVolume(%s) for claim %s: %s", o.PVName, uid, faultNames[fault]))
	switch fault {
	case faultRefused:
		return nil, ProvisioningFinished, errors.New("backend refused")
	case faultTimeout:
		w.answerLost(uid)
		return nil, ProvisioningInBackground, errGateTimeout
	}
	a := b.create(o.PVName, uid, classRetains(o.StorageClass), "controller")
	switch fault {
	case faultLostAnswer:
		w.answerLost(uid)
		return nil, ProvisioningInBackground, errGateTimeout
	case faultKillBeforeRecord:
		w.answerLost(uid)
		w.killAfterStep = true
		return nil, ProvisioningInBackground, errGateKilled
	}
	if o.RecordAssetID != nil {
		o.RecordAssetID(a.id)
		// The ID reaches the journal before anything else happens (what
		// case 8 asks of the controller); a kill before it is
		// faultKillBeforeRecord.
		w.ctl.c.journal.Flush(ctx)
		w.idRecorded(uid, o.PVName, a.id)
	}
	if fault == faultKillAfterRecord {
		w.killAfterStep = true
		return nil, ProvisioningInBackground, errGateKilled
	}
	return o.NewVolume(VolumeSpec{Source: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testProvisioner, VolumeHandle: a.id}}}),
		ProvisioningFinished, nil
}

func (b *gateBackend) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.CSI == nil || pv.Spec.ClaimRef == nil {
		return Ignore("not a volume of this backend")
	}
	if b.w.chooseDeleteFault() {
		return errors.New("DeleteVolume timed out")
	}
	b.remove(pv.Spec.CSI.VolumeHandle, pv.Spec.ClaimRef.UID, "controller", "Delete of PV "+pv.Name)
	return nil
}

func (b *gateBackend) DeleteRecordedAsset(_ context.Context, o ProvisionOptions, id string) error {
	if b.w.chooseDeleteFault() {
		return errors.New("DeleteVolume timed out")
	}
	b.remove(id, o.PVC.UID, "controller", fmt.Sprintf("DeleteRecordedAsset(%s) of claim %s", o.PVName, o.PVC.UID))
	return nil
}

// create returns the live asset named name, creating it if there is none.
func (b *gateBackend) create(name string, claim types.UID, retain bool, creator string) *gateAsset {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.assets {
		if a.name == name && !a.deleted {
			return a
		}
	}
	b.seq++
	a := &gateAsset{id: fmt.Sprintf("vol-%d", b.seq), name: name, claim: claim, retain: retain, creator: creator}
	b.assets[a.id] = a
	return a
}

// remove deletes asset id on behalf of claim, checking invariants 1 and 2.
// A gone asset is success, as for a CSI driver.
func (b *gateBackend) remove(id string, claim types.UID, actor, what string) {
	b.mu.Lock()
	a := b.assets[id]
	if a == nil || a.deleted {
		b.mu.Unlock()
		b.w.note(fmt.Sprintf("%s: %s of a gone asset", actor, what))
		return
	}
	a.deleted = true
	b.mu.Unlock()
	b.w.note(fmt.Sprintf("%s: %s deleted asset %s (made for claim %s, retain=%t)", actor, what, id, a.claim, a.retain))
	if a.retain {
		b.w.violate("invariant 1: asset %s of a Retain class was deleted (%s)", id, what)
	}
	if a.claim != claim {
		b.w.violate("invariant 2: asset %s, made for claim %s, was deleted for claim %s (%s)", id, a.claim, claim, what)
	}
}

// live returns the assets not deleted, by ID.
func (b *gateBackend) live() []*gateAsset {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*gateAsset
	for _, a := range b.assets {
		if !a.deleted {
			c := *a
			out = append(out, &c)
		}
	}
	return out
}

// fingerprint says what the backend holds, for the quiescence loop.
func (b *gateBackend) fingerprint() string {
	var s strings.Builder
	for _, a := range sortedAssets(b.live()) {
		fmt.Fprintf(&s, "%s=%s,", a.id, a.name)
	}
	return s.String()
}

// classRetains reports whether class keeps the volumes of released claims.
func classRetains(class *storagev1.StorageClass) bool {
	return class != nil && class.ReclaimPolicy != nil && *class.ReclaimPolicy == corev1.PersistentVolumeReclaimRetain
}

func sortedAssets(as []*gateAsset) []*gateAsset {
	slices.SortFunc(as, func(a, b *gateAsset) int { return strings.Compare(a.id, b.id) })
	return as
}
