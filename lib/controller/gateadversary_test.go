// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/kubeprov/external-storage/lib/recordkey"
)

// The adversary holds narrow rights in the provisioner's namespace: read
// and write ConfigMaps (the journal), create Secrets (not read or update
// them), and edit PV annotations. It reads what those rights show it: the
// journal's entries, the PVs and their volume handles, the Lease.

func (w *gateWorld) adversary(kind gateStep) {
	switch kind {
	case stepAdvKeepEntry:
		w.keepEntry()
	case stepAdvReplayEntry:
		w.replayEntry()
	case stepAdvDeleteEntry:
		w.changeEntry(func(data map[string]string, key string) { delete(data, key) })
	case stepAdvEditEntry:
		w.changeEntry(func(data map[string]string, key string) {
			data[key] = strings.Replace(data[key], `"name":"`, `"name":"x`, 1)
		})
	case stepAdvPlantKey:
		w.plantKey()
	case stepAdvForgeEntry:
		w.forgeEntry()
	case stepAdvEditAnnotation:
		w.editAnnotation()
	}
}

// journalEntries returns the journal's entry keys and its data, as the
// server has them.
func (w *gateWorld) journalEntries() ([]string, map[string]string) {
	cm, err := w.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(w.ctx, JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil {
		return nil, nil
	}
	var keys []string
	for k := range cm.Data {
		if !journal.IsClassKey(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, cm.Data
}

// keepEntry (case 1) copies a signed entry, with its class, for later:
// one the server holds, or one whose removal the journal has not written
// yet (it writes removals lazily: the server still holds those).
func (w *gateWorld) keepEntry() {
	keys, data := w.journalEntries()
	if data == nil {
		data = map[string]string{}
	}
	w.mu.Lock()
	for k, v := range w.pending {
		if _, ok := data[k]; !ok {
			keys = append(keys, k)
			data[k] = v
			if ck := entryClassKey(v); ck != "" {
				data[ck] = w.classData[ck]
			}
		}
	}
	w.mu.Unlock()
	slices.Sort(keys)
	if len(keys) == 0 {
		return
	}
	k := keys[w.ch.intn(len(keys))]
	ck := entryClassKey(data[k])
	w.kept = append(w.kept, keptEntry{key: k, value: data[k], classKey: ck, classValue: data[ck]})
	w.note(fmt.Sprintf("kept %s (asset ID %q)", k, entryAssetID(data[k])))
}

func entryAssetID(value string) string {
	var e struct {
		AssetID string `json:"assetID"`
	}
	_ = json.Unmarshal([]byte(value), &e)
	return e.AssetID
}

// replayEntry (case 1) writes a kept copy back into the journal.
func (w *gateWorld) replayEntry() {
	if len(w.kept) == 0 {
		return
	}
	e := w.kept[w.ch.intn(len(w.kept))]
	w.writeJournal(func(data map[string]string) {
		data[e.key] = e.value
		if e.classKey != "" {
			data[e.classKey] = e.classValue
		}
	})
	w.note(fmt.Sprintf("wrote back %s (asset ID %q)", e.key, entryAssetID(e.value)))
}

func (w *gateWorld) changeEntry(change func(data map[string]string, key string)) {
	keys, _ := w.journalEntries()
	if len(keys) == 0 {
		return
	}
	k := keys[w.ch.intn(len(keys))]
	w.writeJournal(func(data map[string]string) { change(data, k) })
	w.note(k)
}

// plantKey (case 2) creates the journal's key Secret with a key the
// adversary knows, before the controller first starts and creates it.
func (w *gateWorld) plantKey() {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: JournalKeySecret, Namespace: OutOfClusterNamespace},
		Data: map[string][]byte{recordkey.SecretField: gatePlantedKeyBytes}}
	_, err := w.client.CoreV1().Secrets(OutOfClusterNamespace).Create(w.ctx, s, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		w.note("the Secret exists already")
	case err != nil:
		w.t.Fatal(err)
	default:
		w.note("created Secret " + JournalKeySecret + " with a known key")
	}
}

// keyPlanted: the Secret holds the adversary's key (it made the Secret;
// it cannot read it, but its create succeeded).
func (w *gateWorld) keyPlanted() bool {
	s, err := w.client.CoreV1().Secrets(OutOfClusterNamespace).Get(w.ctx, JournalKeySecret, metav1.GetOptions{})
	return err == nil && string(s.Data[recordkey.SecretField]) == string(gatePlantedKeyBytes)
}

// knownAssetIDs are the volume IDs the adversary can read: PV volume
// handles and the IDs in journal entries.
func (w *gateWorld) knownAssetIDs() []string {
	ids := map[string]bool{}
	for _, pv := range w.volumes() {
		if pv.Spec.CSI != nil {
			ids[pv.Spec.CSI.VolumeHandle] = true
		}
	}
	keys, data := w.journalEntries()
	for _, k := range keys {
		if id := entryAssetID(data[k]); id != "" {
			ids[id] = true
		}
	}
	for _, e := range w.kept {
		if id := entryAssetID(e.value); id != "" {
			ids[id] = true
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// forgeEntry (case 2) writes an entry signed with the planted key: a claim
// that never existed, of either class, naming a volume ID the adversary
// read (or none, which asks for a CreateVolume), under no Lease term or the
// current one.
func (w *gateWorld) forgeEntry() {
	if !w.keyPlanted() {
		return
	}
	ids := append([]string{""}, w.knownAssetIDs()...)
	id := ids[w.ch.intn(len(ids))]
	className := []string{gateClassDelete, gateClassRetain}[w.ch.intn(2)]
	w.forgeEntryFor(id, className, w.ch.intn(2) == 0)
}

// forgeEntryFor forges an entry for a claim that never existed, of class
// className, naming volume id, under the current Lease term or none.
func (w *gateWorld) forgeEntryFor(id, className string, underLease bool) {
	class, err := w.client.StorageV1().StorageClasses().Get(w.ctx, className, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.forged++
	claim := gateClaim(fmt.Sprintf("f%d", w.forged), types.UID(fmt.Sprintf("forged-%d", w.forged)), className)
	classData, err := json.Marshal(journal.StrippedClass(class))
	if err != nil {
		w.t.Fatal(err)
	}
	ck := journal.ClassKey(classData)
	e := journal.Entry{Claim: journal.StrippedClaim(claim, nil, []string{"example.com/tier"}, systemClaimAnnotations), ClassKey: ck, AssetID: id}
	if underLease {
		e.Lease = w.lease.term()
	}
	b, err := json.Marshal(e)
	if err != nil {
		w.t.Fatal(err)
	}
	pvName := DefaultVolumeNamePrefix + "-" + string(claim.UID)
	value := journal.SignedEntry(gatePlantedKeyBytes, OutOfClusterNamespace, JournalName(testProvisioner, ""), pvName, b, string(classData))
	w.writeJournal(func(data map[string]string) {
		data[pvName] = value
		data[ck] = string(classData)
	})
	w.note(fmt.Sprintf("forged %s: claim %s, class %s, asset ID %q", pvName, claim.UID, className, id))
}

// editAnnotation takes the provisioned-by annotation off a PV, or puts it
// back.
func (w *gateWorld) editAnnotation() {
	pvs := w.volumes()
	if len(pvs) == 0 {
		return
	}
	pv := pvs[w.ch.intn(len(pvs))]
	if _, ok := pv.Annotations[AnnProvisionedBy]; ok {
		delete(pv.Annotations, AnnProvisionedBy)
	} else {
		if pv.Annotations == nil {
			pv.Annotations = map[string]string{}
		}
		pv.Annotations[AnnProvisionedBy] = testProvisioner
	}
	if _, err := w.client.CoreV1().PersistentVolumes().Update(w.ctx, &pv, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.note(fmt.Sprintf("%s provisioned-by %q", pv.Name, pv.Annotations[AnnProvisionedBy]))
}
