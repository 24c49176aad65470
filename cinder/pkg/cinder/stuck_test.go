// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeprov/external-storage/lib/controller"
)

// ourMetadata is what Provision writes on the volumes it creates for testPV.
func ourMetadata() map[string]string {
	return map[string]string{MetaIdentity: testIdentity, MetaPVName: testPV, MetaClaim: "apps/data"}
}

// longAgo is older than DefaultStuckCreatingTimeout.
func longAgo() string { return cinderTime(time.Now().Add(-2 * DefaultStuckCreatingTimeout)) }

// A volume of ours creating for longer than the timeout (cinder-api died
// before casting it to the scheduler) is force-deleted, and the same
// attempt creates another, which binds.
func TestProvisionReplacesStuckVolume(t *testing.T) {
	e := newEnv(t)
	stuck := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusCreating, CreatedAt: longAgo(), Metadata: ourMetadata()})
	pv, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatalf("Provision: %v (state %s)", err, state)
	}
	assertCalls(t, e.cinder, "list", "force-delete", "create", "reserve", "initialize", "list")
	if e.cinder.volume(stuck.ID) != nil {
		t.Errorf("stuck volume %s still there", stuck.ID)
	}
	id := pv.Annotations[AnnVolumeID]
	if id == stuck.ID || e.cinder.volume(id) == nil || e.cinder.count() != 1 {
		t.Errorf("PV names volume %s; want the one new volume (stuck %s, %d volumes)", id, stuck.ID, e.cinder.count())
	}
}

// When the volume stays creating during the wait, the attempt ends once it
// counts as stuck, not at the operation's timeout; the next one replaces
// it.
func TestProvisionWaitEndsWhenStuck(t *testing.T) {
	e := newEnv(t, WithStuckCreatingTimeout(50*time.Millisecond))
	e.cinder.createStuck = true
	c, cancel := context.WithTimeout(ctx(t), time.Minute)
	defer cancel()
	_, state, err := e.p.Provision(c, provisionOptions(nil, "1Gi"))
	if err == nil || state != controller.ProvisioningInBackground || !strings.Contains(err.Error(), "it is stuck") {
		t.Fatalf("state = %s, err = %v; want InBackground, stuck", state, err)
	}
	if c.Err() != nil {
		t.Fatalf("waited for the operation's timeout")
	}
	assertCalls(t, e.cinder, "list", "create")

	// The fake wrote created_at before the wait began, so by Cinder's
	// clock too the volume is stuck now: the retry replaces it.
	e.cinder.resetCalls()
	e.cinder.mu.Lock()
	e.cinder.createStuck = false
	e.cinder.mu.Unlock()
	pv, state, err := e.p.Provision(c, provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatalf("retry: %v (state %s)", err, state)
	}
	assertCalls(t, e.cinder, "list", "force-delete", "create", "reserve", "initialize", "list")
	if got := pv.Annotations[AnnVolumeID]; got != "vol-2" || e.cinder.count() != 1 {
		t.Errorf("PV names %s, %d volumes; want vol-2 alone", got, e.cinder.count())
	}
}

// Volumes that are not stuck, or not ours to delete, are never
// force-deleted.
func TestProvisionNeverForceDeletes(t *testing.T) {
	young := cinderTime(time.Now().Add(-time.Minute))
	otherPV := ourMetadata()
	otherPV[MetaPVName] = "pvc-other"
	adopted := []string{"list", "reserve", "initialize", "list"}
	cases := map[string]struct {
		vol       fakeVolume
		wantState controller.ProvisioningState
		wantErr   string
		wantCalls []string
	}{
		// Waited for until it is available, then used.
		"young creating":     {vol: fakeVolume{Status: statusCreating, CreatedAt: young, Metadata: ourMetadata()}, wantCalls: adopted},
		"created_at missing": {vol: fakeVolume{Status: statusCreating, Metadata: ourMetadata()}, wantCalls: adopted},
		"metadata names another PV": {
			vol:       fakeVolume{Status: statusCreating, CreatedAt: longAgo(), Metadata: otherPV},
			wantCalls: adopted,
		},
		"old but available": {vol: fakeVolume{Status: statusAvailable, CreatedAt: longAgo(), Metadata: ourMetadata()}, wantCalls: adopted},
		// gophercloud fails the whole list: no age, nothing done.
		"created_at unparseable": {
			vol:       fakeVolume{Status: statusCreating, CreatedAt: "last tuesday", Metadata: ourMetadata()},
			wantState: controller.ProvisioningNoChange, wantErr: "listing Cinder volumes",
			wantCalls: []string{"list"},
		},
		"foreign": {
			vol:       fakeVolume{Status: statusCreating, CreatedAt: longAgo(), Metadata: map[string]string{MetaIdentity: "someone-else", MetaPVName: testPV}},
			wantState: controller.ProvisioningFinished, wantErr: "not created by this provisioner",
			wantCalls: []string{"list"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.cinder.creatingPolls = 3
			tc.vol.Name, tc.vol.Size = testPV, 1
			v := e.cinder.addVolume(tc.vol)
			pv, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Provision: %v", err)
				}
				if pv.Annotations[AnnVolumeID] != v.ID {
					t.Errorf("PV names volume %s, want %s", pv.Annotations[AnnVolumeID], v.ID)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) || state != tc.wantState {
				t.Errorf("state = %s, err = %v; want %s, %q", state, err, tc.wantState, tc.wantErr)
			}
			assertCalls(t, e.cinder, tc.wantCalls...)
			if e.cinder.volume(v.ID) == nil {
				t.Errorf("volume %s deleted", v.ID)
			}
		})
	}
}

// A young volume that stays creating is waited for until the operation's
// context ends, and kept.
func TestProvisionYoungCreatingVolumeKept(t *testing.T) {
	e := newEnv(t)
	v := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusCreating, CreatedAt: cinderTime(time.Now()), Metadata: ourMetadata(), stuck: true})
	c, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	_, state, err := e.p.Provision(c, provisionOptions(nil, "1Gi"))
	if err == nil || state != controller.ProvisioningInBackground || !strings.Contains(err.Error(), "still creating") {
		t.Errorf("state = %s, err = %v; want InBackground, still creating", state, err)
	}
	assertCalls(t, e.cinder, "list")
	if e.cinder.volume(v.ID) == nil {
		t.Errorf("volume %s deleted", v.ID)
	}
}

// Without the right to force-delete (Cinder's default policy is admin
// only) the stuck volume stays, and the error tells the admin what to do.
func TestProvisionStuckForceDeleteRefused(t *testing.T) {
	for _, code := range []int{http.StatusForbidden, http.StatusBadRequest} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			e := newEnv(t)
			e.cinder.fail["force-delete"] = code
			created := time.Now().Add(-2 * DefaultStuckCreatingTimeout)
			stuck := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusCreating, CreatedAt: cinderTime(created), Metadata: ourMetadata()})
			_, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
			if err == nil || state != controller.ProvisioningInBackground {
				t.Fatalf("state = %s, err = %v; want InBackground: the volume is still there", state, err)
			}
			for _, want := range []string{
				"cinder volume " + stuck.ID + " has been creating since " + created.UTC().Format(time.RFC3339),
				"--stuck-creating-timeout", "it is stuck",
				"`openstack volume delete --force " + stuck.ID + "`", "`cinder force-delete " + stuck.ID + "`",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// A plain delete is tried (Cinder takes it for a volume never
			// scheduled) and refused for this one.
			assertCalls(t, e.cinder, "list", "force-delete", "delete")
			if e.cinder.volume(stuck.ID) == nil || e.cinder.count() != 1 {
				t.Errorf("want the stuck volume alone, have %d volumes", e.cinder.count())
			}
		})
	}
}

// A volume that no scheduler ever saw (the cinder-api crash) is deleted by
// a plain delete when force-delete is not allowed.
func TestProvisionStuckNeverScheduledWithoutAdmin(t *testing.T) {
	e := newEnv(t)
	e.cinder.fail["force-delete"] = http.StatusForbidden
	stuck := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusCreating, CreatedAt: longAgo(), Metadata: ourMetadata(), neverScheduled: true})
	pv, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatalf("Provision: %v (state %s)", err, state)
	}
	assertCalls(t, e.cinder, "list", "force-delete", "delete", "create", "reserve", "initialize", "list")
	if e.cinder.volume(stuck.ID) != nil || pv.Annotations[AnnVolumeID] == stuck.ID || e.cinder.count() != 1 {
		t.Errorf("stuck volume %s kept or reused; %d volumes", stuck.ID, e.cinder.count())
	}
}

func TestWithStuckCreatingTimeoutChecks(t *testing.T) {
	f := newFakeCinder(t)
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := New(f.client(), fake.NewClientset(), testIdentity, WithStuckCreatingTimeout(d)); err == nil {
			t.Errorf("WithStuckCreatingTimeout(%v) accepted", d)
		}
	}
}
