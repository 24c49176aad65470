// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// idStore is a dirStore whose backend names each asset by an ID, as a CSI
// driver does, recorded with RecordAssetID; it deletes by that ID.
type idStore struct {
	*dirStore

	mu         sync.Mutex
	idDeletes  []string
	deleteByID func(id string) error
}

func (s *idStore) Provision(ctx context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	pv, state, err := s.dirStore.Provision(ctx, o)
	if err == nil && o.RecordAssetID != nil {
		o.RecordAssetID("id-" + o.PVName)
	}
	return pv, state, err
}

func (s *idStore) DeleteRecordedAsset(_ context.Context, _ ProvisionOptions, id string) error {
	s.mu.Lock()
	s.idDeletes = append(s.idDeletes, id)
	f := s.deleteByID
	s.mu.Unlock()
	if f != nil {
		if err := f(id); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(s.root, strings.TrimPrefix(id, "id-")))
}

// interrupted provisions claim c of class gold under term, with the
// process "killed" before the PV is saved, and writes the journal as it
// stands: the first controller's state when it dies.
func interrupted(t *testing.T, p Provisioner, term *journal.LeaseTerm, goldClass *storagev1.StorageClass) *fixture {
	t.Helper()
	first := newFixture(t, p, nil, goldClass, claim("c", "gold"))
	first.c.journal.Term.Store(term)
	first.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("killed before the save")
	})
	if err := first.c.syncClaim(first.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	first.c.journal.Flush(first.ctx)
	return first
}

// The claim of an operation interrupted before its PV was saved is gone
// when the controller starts again. With the asset's ID in the journal the
// asset is deleted by it and nothing is provisioned again, even when
// another identity held the Lease meanwhile (it may have served the claim
// and deleted the asset; deleting a gone asset is harmless, making it again
// is not). Without an ID, an operation written under another holder's watch
// is left for an admin instead of being provisioned again; one of the same
// holder, or of the one the new holder took over from, is finished as
// before. A Retain class's asset is never deleted on the word of an entry
// another holder may have finished with.
func TestResumedOperationOfDeletedClaimIsNotProvisionedAgain(t *testing.T) {
	retain := func(sc *storagev1.StorageClass) {
		sc.ReclaimPolicy = new(corev1.PersistentVolumeReclaimPolicy)
		*sc.ReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	written := &journal.LeaseTerm{Holder: "ours-1", Transitions: 3}
	for _, tc := range []struct {
		name      string
		recordsID bool
		retain    bool
		now       *journal.LeaseTerm
		// what the restarted controller does
		wantProvisions int // calls of Provision after the restart
		wantIDDeletes  int
		wantKept       bool
		wantEvent      string
	}{
		{name: "ID recorded, took over from the writer", recordsID: true, now: &journal.LeaseTerm{Holder: "ours-2", Transitions: 4}, wantIDDeletes: 1},
		{name: "ID recorded, another holder since", recordsID: true, now: &journal.LeaseTerm{Holder: "ours-2", Transitions: 5}, wantIDDeletes: 1},
		{name: "ID recorded, another holder since, Retain class", recordsID: true, retain: true, now: &journal.LeaseTerm{Holder: "ours-2", Transitions: 5},
			wantKept: true, wantEvent: "reclaimPolicy Retain"},
		{name: "no ID, same identity restarted", now: &journal.LeaseTerm{Holder: "ours-1", Transitions: 3}, wantProvisions: 1},
		{name: "no ID, took over from the writer", now: &journal.LeaseTerm{Holder: "ours-2", Transitions: 4}, wantProvisions: 1},
		{name: "no ID, another holder since", now: &journal.LeaseTerm{Holder: "ours-2", Transitions: 5},
			wantKept: true, wantEvent: "another identity held the leader Lease since ours-1 wrote the entry at leader transition 3 (now 5)"},
		{name: "no ID, Lease recreated", now: &journal.LeaseTerm{Holder: "ours-2", Transitions: 0},
			wantKept: true, wantEvent: "the leader Lease was recreated"},
		{name: "no ID, no leader election now", wantProvisions: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gold := class("gold")
			if tc.retain {
				gold = class("gold", retain)
			}
			dirs := newStore(t)
			var p Provisioner = dirs
			store := &idStore{dirStore: dirs}
			if tc.recordsID {
				p = store
			}
			first := interrupted(t, p, written, gold)
			before := dirs.provisionCount()

			second := first.restartedUnder(tc.now, p, nil, gold)
			if err := second.c.syncClaim(second.ctx, "ns/c"); err != nil {
				t.Fatal(err)
			}
			second.c.journal.Flush(second.ctx)
			if n := dirs.provisionCount() - before; n != tc.wantProvisions {
				t.Errorf("Provision called %d times after the restart, want %d", n, tc.wantProvisions)
			}
			if n := len(store.idDeletes); n != tc.wantIDDeletes {
				t.Errorf("DeleteRecordedAsset called %d times, want %d", n, tc.wantIDDeletes)
			} else if n == 1 && store.idDeletes[0] != "id-pvc-uid-c" {
				t.Errorf("DeleteRecordedAsset of %q, want the recorded ID id-pvc-uid-c", store.idDeletes[0])
			}
			if second.c.operations.get("pvc-uid-c") != nil {
				t.Error("operation still in flight")
			}
			keys := second.journalKeys()
			if tc.wantKept {
				if !slices.Equal(keys, []string{"pvc-uid-c"}) {
					t.Fatalf("journal holds %v, want the entry kept for an admin", keys)
				}
				if len(dirs.assets(t)) != 1 {
					t.Errorf("assets %v: want the asset left as it was", dirs.assets(t))
				}
				second.requireEvent(EventProvisioningCleanupSkipped, tc.wantEvent)
				return
			}
			if len(keys) != 0 || len(dirs.assets(t)) != 0 {
				t.Fatalf("journal holds %v and the backend %v after the cleanup, want neither", keys, dirs.assets(t))
			}
		})
	}
}

// An operation resumed under a new term is the new holder's: a second
// restart, by a third instance that took over from it, finishes it as
// before instead of leaving it for an admin.
func TestResumedOperationIsAdoptedByTheNewHolder(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningInBackground, errors.New("still creating")
	}
	first := newFixture(t, store, nil, class("gold"), claim("c", "gold"))
	first.c.journal.Term.Store(&journal.LeaseTerm{Holder: "ours-1", Transitions: 3})
	_ = first.c.syncClaim(first.ctx, "ns/c")
	first.c.journal.Flush(first.ctx)

	// The second instance resumes it and dies before it ends.
	second := first.restartedUnder(&journal.LeaseTerm{Holder: "ours-2", Transitions: 4}, store, nil, class("gold"), claim("c", "gold"))
	second.c.journal.Flush(second.ctx)

	store.provisionF = nil
	third := second.restartedUnder(&journal.LeaseTerm{Holder: "ours-3", Transitions: 5}, store, nil, class("gold"))
	if err := third.c.syncClaim(third.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	third.c.journal.Flush(third.ctx)
	if keys, assets := third.journalKeys(), store.assets(t); len(keys) != 0 || len(assets) != 0 {
		t.Fatalf("journal holds %v and the backend %v: the adopted operation was not finished", keys, assets)
	}
}

// An operation written under another holder's watch whose claim still
// exists is the claim's to finish: it is provisioned as usual, and from
// then on it is this instance's operation, finished as before if the claim
// goes while it is still in progress.
func TestResumedOperationOfAnExistingClaimIsProvisioned(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningInBackground, errors.New("still creating")
	}
	first := newFixture(t, store, nil, class("gold"), claim("c", "gold"))
	first.c.journal.Term.Store(&journal.LeaseTerm{Holder: "ours-1", Transitions: 3})
	_ = first.c.syncClaim(first.ctx, "ns/c")
	first.c.journal.Flush(first.ctx)

	second := first.restartedUnder(&journal.LeaseTerm{Holder: "ours-2", Transitions: 5}, store, nil, class("gold"), claim("c", "gold"))
	if err := second.c.syncClaim(second.ctx, "ns/c"); err == nil {
		t.Fatal("setup: the resumed operation did not stay in progress")
	}
	// The claim is deleted while Provision still answers "in background".
	if err := second.c.claimInformer.GetIndexer().Delete(claim("c", "gold")); err != nil {
		t.Fatal(err)
	}
	store.provisionF = nil
	before := store.provisionCount()
	if err := second.c.syncClaim(second.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	second.c.journal.Flush(second.ctx)
	if store.provisionCount() != before+1 || len(store.assets(t)) != 0 || len(second.journalKeys()) != 0 {
		t.Fatalf("Provision calls %d (want %d), assets %v, journal %v: want the operation finished and its asset deleted",
			store.provisionCount(), before+1, store.assets(t), second.journalKeys())
	}
}
