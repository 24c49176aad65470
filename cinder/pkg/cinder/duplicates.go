// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/gate"
)

// Cinder's create is not idempotent: a create whose answer never came (the
// replica was killed, the request timed out) may be carried out after the
// retry has looked the PV's volume up by name and made another. The PV then
// records one and the other is nobody's. Provision deletes such duplicates
// once its own volume is ready, and Delete deletes those made later still.

// keeperOf picks, of several volumes this provisioner made for one PV, the
// one to go on with: the one an attempt got furthest with, then the oldest,
// then the lowest ID, so that every attempt picks the same.
func keeperOf(vols []volumes.Volume) *volumes.Volume {
	best := &vols[0]
	for i := range vols {
		if further(&vols[i], best) {
			best = &vols[i]
		}
	}
	return best
}

// further says whether an attempt got further with a than with b.
func further(a, b *volumes.Volume) bool {
	if pa, pb := progress(a.Status), progress(b.Status); pa != pb {
		return pa > pb
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// progress ranks a status by how far provisioning got: reserved for (or
// connected to) this provisioner, available, still creating, failed.
func progress(status string) int {
	switch status {
	case statusReserved, statusAttaching:
		return 3
	case statusAvailable:
		return 2
	case statusCreating:
		return 1
	}
	return 0
}

// duplicateWait is how long Provision waits for a duplicate to leave
// creating before it leaves the duplicate to Delete: the PV is good
// meanwhile.
const duplicateWait = 30 * time.Second

// deleteDuplicatesNow deletes the duplicates of kept that Cinder has now,
// for Provision: a failure only delays their deletion to the PV's.
func (p *Provisioner) deleteDuplicatesNow(ctx context.Context, pvName, kept string) {
	ctx, cancel := context.WithTimeout(ctx, duplicateWait)
	defer cancel()
	if err := p.deleteDuplicates(ctx, p.cfg.connector, pvName, kept); err != nil {
		klog.FromContext(ctx).Error(err, "Could not delete a second Cinder volume made for this PV; deleting the PV will")
	}
}

// deleteDuplicates deletes the volumes named pvName, other than kept, that
// this provisioner made for that PV, each through gate.DeleteDuplicate. A
// duplicate still creating is waited for: Cinder refuses to delete it until
// it leaves creating. Every duplicate is tried; the errors (of deleting, not
// the gate's refusals) are joined.
func (p *Provisioner) deleteDuplicates(ctx context.Context, conn Connector, pvName, kept string) error {
	found, err := findByName(ctx, p.volumes, pvName)
	if err != nil {
		return fmt.Errorf("listing Cinder volumes named %s: %w", pvName, cinderError(err))
	}
	var errs []error
	for i := range found {
		vol := &found[i]
		// Another provisioner's volume of the same name is not ours to judge.
		if vol.ID == kept || vol.Metadata[MetaIdentity] != p.identity {
			continue
		}
		if err := p.deleteDuplicate(ctx, conn, vol, pvName, kept); err != nil {
			errs = append(errs, fmt.Errorf("cinder volume %s, a second volume made for PV %s: %w", vol.ID, pvName, err))
		}
	}
	return errors.Join(errs...)
}

// deleteDuplicate deletes vol, a second volume named after pvName, when
// the gate allows it; a refusal is logged, not an error.
func (p *Provisioner) deleteDuplicate(ctx context.Context, conn Connector, vol *volumes.Volume, pvName, kept string) error {
	err := gate.DeleteDuplicate(gate.Duplicate{
		Asset:   vol.ID,
		MadeFor: vol.Metadata[MetaPVName],
		Volume:  pvName,
		Kept:    kept,
		InUse:   vol.Status == statusInUse || len(vol.Attachments) > 0,
	})
	if err != nil {
		// Not provably a duplicate: it is left, and nothing waits for it.
		klog.FromContext(ctx).Info("Leaving a Cinder volume named after this PV alone", "volumeID", vol.ID, "reason", err.Error())
		return nil
	}
	if at := p.stuckAt(vol, pvName); !at.IsZero() && time.Now().After(at) {
		return p.deleteStuck(ctx, vol)
	}
	if vol.Status == statusCreating {
		// A status error ends the wait too: such a volume is deleted as well.
		v, err := waitAvailable(ctx, p.volumes, vol.ID, p.cfg.pollInterval)
		var se *statusError
		if err != nil && !errors.As(err, &se) {
			return fmt.Errorf("waiting for it to leave creating: %w", err)
		}
		vol = v
	}
	if gone, err := p.disconnect(ctx, conn, vol, vol.ID); gone || err != nil {
		return err
	}
	if err := deleteVolume(ctx, p.volumes, vol.ID, p.cfg.pollInterval); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Deleted a second Cinder volume made for this PV (a create whose answer was lost)", "duplicate", vol.ID, "kept", kept)
	return nil
}
