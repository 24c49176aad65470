// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeprov/external-storage/lib/internal/journal"
)

func withReclaim(policy corev1.PersistentVolumeReclaimPolicy) func(*storagev1.StorageClass) {
	return func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = &policy }
}

// flushingStore writes the journal right after Provision recorded the
// asset's ID, as the journal's writer does while the PV is being saved:
// the entry with the ID is then on the server for anyone to read.
type flushingStore struct {
	*idStore
	mu      sync.Mutex
	journal *journal.Journal
}

func (s *flushingStore) Provision(ctx context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	pv, state, err := s.idStore.Provision(ctx, o)
	s.mu.Lock()
	j := s.journal
	s.mu.Unlock()
	if j != nil {
		j.Flush(ctx)
	}
	return pv, state, err
}

// keepEntries copies, into kept, every value of key pvName containing
// marker that f's client writes to a ConfigMap: what someone who can read
// ConfigMaps in the provisioner's namespace sees.
func keepEntries(f *fixture, pvName, marker string) func() map[string]string {
	var mu sync.Mutex
	var kept map[string]string
	f.client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if cm, ok := o.GetObject().(*corev1.ConfigMap); ok && strings.Contains(cm.Data[pvName], marker) {
				mu.Lock()
				kept = maps.Clone(cm.Data)
				mu.Unlock()
			}
		}
		return false, nil, nil
	})
	return func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		return kept
	}
}

// Issue 36 case 1: someone who can read and write the journal's ConfigMap
// keeps a genuine entry, with its asset ID, while the claim is provisioned.
// The claim is saved as a PV, later deleted; an admin deletes the Released
// PV to keep the data (a Retain class, or a PV they switched to Retain);
// the kept entry is written back; the controller starts again, without
// leader election. The entry is older than the completion the journal
// wrote, so nothing is deleted or provisioned on it, and a Warning event on
// the claim says why.
func TestReplayedJournalEntryDeletesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy corev1.PersistentVolumeReclaimPolicy
	}{
		{"Retain class", corev1.PersistentVolumeReclaimRetain},
		{"Delete class, PV switched to Retain by an admin", corev1.PersistentVolumeReclaimDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gold := class("gold", withReclaim(tc.policy))
			dirs := newStore(t)
			store := &flushingStore{idStore: &idStore{dirStore: dirs}}
			first := newFixture(t, store, nil, gold, claim("c", "gold"))
			store.mu.Lock()
			store.journal = first.c.journal
			store.mu.Unlock()
			kept := keepEntries(first, "pvc-uid-c", `"assetID":"id-pvc-uid-c"`)
			if err := first.c.syncClaim(first.ctx, "ns/c"); err != nil {
				t.Fatal(err)
			}
			if first.pv("pvc-uid-c") == nil || kept() == nil {
				t.Fatalf("setup: PV saved %v, entry with the asset ID seen %v", first.pv("pvc-uid-c") != nil, kept() != nil)
			}
			// The operation is complete: its removal is written.
			first.c.journal.Flush(first.ctx)
			if keys := first.journalKeys(); len(keys) != 0 {
				t.Fatalf("setup: journal holds %v after the PV was saved", keys)
			}
			before := dirs.provisionCount()

			// The claim and the PV are gone (not given to the restarted
			// controller); the kept entry is written back.
			second := first.restarted(store, func(cm *corev1.ConfigMap) { maps.Copy(cm.Data, kept()) }, gold)
			if err := second.c.syncClaim(second.ctx, "ns/c"); err != nil {
				t.Fatal(err)
			}
			second.c.journal.Flush(second.ctx)
			if n := len(store.idDeletes); n != 0 {
				t.Fatalf("the retained asset was deleted by its recorded ID on a replayed entry (%d DeleteRecordedAsset calls)", n)
			}
			if n := dirs.provisionCount() - before; n != 0 || !slices.Equal(dirs.assets(t), []string{"pvc-uid-c"}) {
				t.Fatalf("Provision called %d times, assets %v: want the retained asset untouched", n, dirs.assets(t))
			}
			second.requireEvent(EventProvisioningCleanupSkipped, "older than the last completions the journal wrote")
		})
	}
}

// Issue 36: the asset of a class that keeps volumes is never deleted when
// an operation of a deleted claim is resumed, whoever held the Lease: the
// same holder restarting, and without leader election (a node-local
// DaemonSet), with and without a recorded asset ID.
func TestResumeNeverDeletesTheAssetOfARetainClass(t *testing.T) {
	for _, tc := range []struct {
		name      string
		term      *journal.LeaseTerm
		recordsID bool
	}{
		{"no leader election, ID recorded", nil, true},
		{"same holder restarted, ID recorded", &journal.LeaseTerm{Holder: "ours-1", Transitions: 3}, true},
		{"no leader election, no ID", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gold := class("gold", withReclaim(corev1.PersistentVolumeReclaimRetain))
			dirs := newStore(t)
			store := &idStore{dirStore: dirs}
			var p Provisioner = dirs
			if tc.recordsID {
				p = store
			}
			first := interrupted(t, p, tc.term, gold)
			before := dirs.provisionCount()
			second := first.restartedUnder(tc.term, p, nil, gold)
			if err := second.c.syncClaim(second.ctx, "ns/c"); err != nil {
				t.Fatal(err)
			}
			second.c.journal.Flush(second.ctx)
			if n, provisions := len(store.idDeletes)+len(dirs.deletes), dirs.provisionCount()-before; n != 0 || provisions != 0 {
				t.Fatalf("%d deletes and %d Provision calls after the restart, want none", n, provisions)
			}
			if assets := dirs.assets(t); len(assets) != 1 {
				t.Fatalf("assets %v: want the asset left as it was", assets)
			}
			if keys := second.journalKeys(); !slices.Equal(keys, []string{"pvc-uid-c"}) {
				t.Fatalf("journal holds %v, want the entry kept for an admin", keys)
			}
			second.requireEvent(EventProvisioningCleanupSkipped, "reclaimPolicy Retain")
		})
	}
}

// Issue 36 case 2: someone who can create, but not read or update, Secrets
// in the provisioner's namespace creates the journal's key Secret before
// the first start, with a key they know, and plants an entry signed with
// it. The controller refuses the key with an error naming the Secret, acts
// on no entry, and tells the waiting claim why it is not provisioned.
func TestPlantedJournalKeyIsRefused(t *testing.T) {
	planted := journalKeySecret()
	planted.UID, planted.Annotations = "planted-uid", nil
	gold := class("gold")
	b, err := json.Marshal(journal.StrippedClass(gold))
	if err != nil {
		t.Fatal(err)
	}
	classData := string(b)
	gone := claim("gone", "gold")
	entry := journal.Entry{Claim: journal.StrippedClaim(gone, nil, nil, systemClaimAnnotations), ClassKey: journal.ClassKey([]byte(classData)), AssetID: "id-pvc-uid-gone"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: JournalName(testProvisioner, ""), Namespace: OutOfClusterNamespace},
		Data: map[string]string{"pvc-uid-gone": signedTestEntry("pvc-uid-gone", entry, classData), entry.ClassKey: classData}}
	dirs := newStore(t)
	store := &idStore{dirStore: dirs}
	f := newFixture(t, store, nil, gold, claim("c", "gold"), cm, planted)

	ctx, cancel := context.WithTimeout(f.ctx, 200*time.Millisecond)
	defer cancel()
	err = f.c.resumeOperations(ctx)
	if err == nil || !strings.Contains(err.Error(), "Secret default/"+JournalKeySecret+" was not created by the provisioner") {
		t.Fatalf("resumeOperations: %v; want the planted key Secret refused by name", err)
	}
	if err := f.c.syncClaim(f.ctx, "ns/gone"); err != nil {
		t.Fatal(err)
	}
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if len(store.idDeletes) != 0 || dirs.provisionCount() != 0 {
		t.Fatalf("%d deletes by ID and %d Provision calls with a planted key, want none", len(store.idDeletes), dirs.provisionCount())
	}
	f.requireEvent(EventProvisioningFailed, JournalKeySecret+" was not created by the provisioner")
}
