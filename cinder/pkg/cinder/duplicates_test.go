// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"slices"
	"testing"
	"time"
)

// volumeIDs is what the fake holds, sorted.
func (f *fakeCinder) volumeIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.volumes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// The fault suite's leak: a replica killed while its create was on the wire,
// and Cinder carrying that create out after the restarted replica looked
// for the PV's volume and found none. The restarted replica's volume gets
// the PV; the other is deleted before Provision returns.
func TestProvisionDeletesVolumeOfLostCreate(t *testing.T) {
	e := newEnv(t)
	e.cinder.afterList = func(f *fakeCinder) {
		f.volumes["lost"] = &fakeVolume{ID: "lost", Name: testPV, Size: 1, Status: statusCreating,
			Metadata: ourMetadata(), CreatedAt: cinderTime(time.Now())}
	}
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	kept := pv.Annotations[AnnVolumeID]
	if kept == "lost" {
		t.Fatalf("PV names the volume of the lost create")
	}
	if got := e.cinder.volumeIDs(); !slices.Equal(got, []string{kept}) {
		t.Errorf("Cinder holds %v, want only the PV's volume %s", got, kept)
	}
	// Waited for until it left creating, then deleted.
	assertCalls(t, e.cinder, "list", "create", "reserve", "initialize", "list", "delete")
}

// Several volumes of this provisioner for one PV (earlier attempts, lost
// creates): Provision goes on with the one an attempt got furthest with,
// deletes the others, and leaves alone what it cannot prove is a duplicate.
func TestProvisionGoesOnWithOneOfSeveral(t *testing.T) {
	e := newEnv(t)
	older := cinderTime(time.Now().Add(-time.Minute))
	available := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Metadata: ourMetadata(), CreatedAt: older})
	reserved := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusReserved, Metadata: ourMetadata(), CreatedAt: cinderTime(time.Now())})
	failed := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: "error", Metadata: ourMetadata(), CreatedAt: older})
	otherPV := ourMetadata()
	otherPV[MetaPVName] = "pvc-other"
	notProven := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Metadata: otherPV, CreatedAt: cinderTime(time.Now())})
	attached := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusInUse, Metadata: ourMetadata(), CreatedAt: cinderTime(time.Now())})
	foreign := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Metadata: map[string]string{MetaIdentity: "someone-else", MetaPVName: testPV}})

	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pv.Annotations[AnnVolumeID]; got != reserved.ID {
		t.Errorf("PV names %s, want %s: the reserved one got furthest", got, reserved.ID)
	}
	want := []string{reserved.ID, notProven.ID, attached.ID, foreign.ID}
	slices.Sort(want)
	if got := e.cinder.volumeIDs(); !slices.Equal(got, want) {
		t.Errorf("Cinder holds %v, want %v (%s and %s deleted)", got, want, available.ID, failed.ID)
	}
}

// A duplicate made after Provision returned (its create answered later
// still) goes with the PV; the PV's deletion waits until it is gone.
func TestDeleteDeletesDuplicates(t *testing.T) {
	e := newEnv(t)
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	e.cinder.creatingPolls = 2
	late := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusCreating, Metadata: ourMetadata(), CreatedAt: cinderTime(time.Now())})
	foreign := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Metadata: map[string]string{MetaIdentity: "someone-else", MetaPVName: testPV}})
	if err := e.p.Delete(ctx(t), pv); err != nil {
		t.Fatal(err)
	}
	if got := e.cinder.volumeIDs(); !slices.Equal(got, []string{foreign.ID}) {
		t.Errorf("Cinder holds %v, want only another provisioner's %s (%s and the PV's deleted)", got, foreign.ID, late.ID)
	}

	// A duplicate Cinder will not delete keeps the PV, so that it is retried.
	e = newEnv(t)
	pv, _, err = e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Metadata: ourMetadata()})
	e.cinder.fail["delete"] = 500
	if err := e.p.Delete(ctx(t), pv); err == nil {
		t.Errorf("Delete succeeded with a duplicate left")
	}
}
