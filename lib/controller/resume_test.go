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
)

// patternStore is shaped like a third party's port of a subdir provisioner:
// each volume is the directory <namespace>/<annotation "example.com/dir">,
// Delete removes the directory its PV names. It omits ClaimMetadataKeys.
// Its first Provision answers "in background", as a slow backend does.
type patternStore struct {
	root string

	mu         sync.Mutex
	provisions []string // directories Provision was called for
	deletes    []string // directories Delete removed
}

func (p *patternStore) Provision(_ context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	dir := filepath.Join(o.PVC.Namespace, o.PVC.Annotations["example.com/dir"])
	p.mu.Lock()
	p.provisions = append(p.provisions, dir)
	first := len(p.provisions) == 1
	p.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(p.root, dir), 0o700); err != nil {
		return nil, ProvisioningFinished, err
	}
	if first {
		return nil, ProvisioningInBackground, errors.New("still creating")
	}
	return o.NewVolume(VolumeSpec{Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}), "", nil
}

func (p *patternStore) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	p.mu.Lock()
	p.deletes = append(p.deletes, pv.Spec.HostPath.Path)
	p.mu.Unlock()
	return os.RemoveAll(filepath.Join(p.root, pv.Spec.HostPath.Path))
}

// declaringPatternStore is the same port, declaring the annotation it reads.
type declaringPatternStore struct{ *patternStore }

func (declaringPatternStore) ClaimMetadataKeys(*storagev1.StorageClass) (labels, annotations []string) {
	return nil, []string{"example.com/dir"}
}

// A claim is deleted while the provisioner is down mid-operation. A port
// that does not say which metadata it reads would, asked again with the
// journal's copy of the claim (annotation gone), name the namespace's
// directory, and deleting that would take every volume of the namespace:
// the controller leaves the operation, keeps the entry and says which
// volume's asset may be left. A port that declares what it reads gets the
// exact claim back and its asset is deleted, and only it.
func TestResumedOperationOfDeletedClaimNeverDeletesOnAGuess(t *testing.T) {
	for _, declares := range []bool{false, true} {
		t.Run(map[bool]string{false: "omits ClaimMetadataKeys", true: "declares ClaimMetadataKeys"}[declares], func(t *testing.T) {
			store := &patternStore{root: t.TempDir()}
			var p Provisioner = store
			if declares {
				p = declaringPatternStore{store}
			}
			// Another volume of the namespace, bound, with data.
			data := filepath.Join(store.root, "ns", "other", "file")
			if err := os.MkdirAll(filepath.Dir(data), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(data, []byte("data"), 0o600); err != nil {
				t.Fatal(err)
			}
			pvc := claim("c", "gold", func(c *corev1.PersistentVolumeClaim) { c.Annotations["example.com/dir"] = "mine" })
			first := newFixture(t, p, nil, class("gold"), pvc)
			if err := first.c.syncClaim(first.ctx, "ns/c"); err == nil {
				t.Fatal("setup: the operation did not stay in progress")
			}
			// Restarted without the claim.
			second := first.restarted(p, nil, class("gold"))
			if err := second.c.syncClaim(second.ctx, "ns/c"); err != nil {
				t.Fatal(err)
			}
			second.c.journal.Flush(second.ctx)
			if _, err := os.Stat(data); err != nil {
				t.Fatalf("another volume's data is gone: %v (Provision for %q, Delete of %q)", err, store.provisions, store.deletes)
			}
			if second.c.operations.get("pvc-uid-c") != nil {
				t.Error("operation still in flight")
			}
			if declares {
				if !slices.Equal(store.deletes, []string{"ns/mine"}) {
					t.Fatalf("deletes %q, want the claim's own directory", store.deletes)
				}
				if keys := second.journalKeys(); len(keys) != 0 {
					t.Fatalf("journal holds %v after the cleanup", keys)
				}
				return
			}
			if len(store.provisions) != 1 || len(store.deletes) != 0 {
				t.Fatalf("Provision for %q, Delete of %q: want neither called again on a guess", store.provisions, store.deletes)
			}
			if _, err := os.Stat(filepath.Join(store.root, "ns", "mine")); err != nil {
				t.Fatalf("the asset that may be left is gone: %v", err)
			}
			second.requireEvent(EventProvisioningCleanupSkipped, "an asset made for volume pvc-uid-c may be left on the backend")
			if keys := second.journalKeys(); !slices.Equal(keys, []string{"pvc-uid-c"}) {
				t.Fatalf("journal holds %v, want the entry kept for an admin", keys)
			}
		})
	}
}

// A signed entry changed in any part (the claim it names, its class beside
// it, its key) is not acted upon after a restart.
func TestChangedJournalEntriesDoNotVerify(t *testing.T) {
	for name, change := range map[string]func(cm *corev1.ConfigMap){
		"claim": func(cm *corev1.ConfigMap) {
			cm.Data["pvc-uid-c"] = strings.Replace(cm.Data["pvc-uid-c"], `"name":"c"`, `"name":"d"`, 1)
		},
		"class": func(cm *corev1.ConfigMap) {
			for k, v := range cm.Data {
				if journal.IsClassKey(k) {
					cm.Data[k] = strings.Replace(v, `"provisioner":`, `"parameters":{"path":"/"},"provisioner":`, 1)
				}
			}
		},
		"key": func(cm *corev1.ConfigMap) {
			cm.Data["pvc-uid-d"] = cm.Data["pvc-uid-c"]
			delete(cm.Data, "pvc-uid-c")
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningInBackground, errors.New("still creating")
			}
			first := newFixture(t, store, nil, class("gold"), claim("c", "gold"))
			_ = first.c.syncClaim(first.ctx, "ns/c")
			second := first.restarted(store, change, class("gold"))
			if second.c.claimQueue.Len() != 0 {
				t.Fatalf("a changed entry was resumed")
			}
			second.requireEvent(EventProvisioningCleanupSkipped, "its signature does not verify")
		})
	}
}
