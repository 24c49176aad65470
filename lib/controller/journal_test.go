// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// journalConfigMaps returns the journal's ConfigMaps on the server, by shard.
func (f *fixture) journalConfigMaps() map[int]*corev1.ConfigMap {
	out := map[int]*corev1.ConfigMap{}
	for i := range journal.Shards {
		cm, err := f.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(f.ctx, journal.ShardName(JournalName(testProvisioner, ""), i), metav1.GetOptions{})
		if err == nil {
			out[i] = cm
		}
	}
	return out
}

// recordAll records one operation per claim, n at a time.
func recordAll(t *testing.T, f *fixture, claims []*corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, pvc := range claims {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f.c.journal.Record(f.ctx, f.c.cfg.volumeName(pvc), journal.Entry{Claim: pvc, Class: sc}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func manyClaims(n, namespaces int, className string) []*corev1.PersistentVolumeClaim {
	claims := make([]*corev1.PersistentVolumeClaim, n)
	for i := range claims {
		claims[i] = claim(fmt.Sprintf("c%d", i), className, func(c *corev1.PersistentVolumeClaim) { c.Namespace = fmt.Sprintf("tenant-%d", i%namespaces) })
	}
	return claims
}

func TestJournalHoldsTenThousandOperations(t *testing.T) {
	// A slow backend answers "in background" for 10,000 claims: their
	// operations stay in flight, and one more claim must still be recorded.
	f := newFixture(t, newStore(t), nil)
	sc := class("gold", func(sc *storagev1.StorageClass) {
		sc.Parameters = map[string]string{"type": "ssd", "replicas": "3", "fsType": "ext4"}
		sc.MountOptions = []string{"noatime"}
	})
	claims := manyClaims(10001, 4, "gold")
	recordAll(t, f, claims, sc, 200)
	cms := f.journalConfigMaps()
	entries, writes := 0, f.writes("create", "configmaps")+f.writes("update", "configmaps")
	for i, cm := range cms {
		classes := 0
		for k, v := range cm.Data {
			if journal.IsClassKey(k) {
				classes++
				continue
			}
			entries++
			if strings.Contains(v, `"provisioner"`) {
				t.Fatalf("entry %s in shard %d carries its class; classes are stored once per ConfigMap", k, i)
			}
		}
		if classes != 1 {
			t.Errorf("shard %d holds %d classes, want the one class once", i, classes)
		}
		if size := cm.Size(); size > 1024*1024 {
			t.Errorf("shard %d is %d bytes, over the object limit", i, size)
		}
	}
	if entries != len(claims) {
		t.Fatalf("journal holds %d entries, want %d", entries, len(claims))
	}
	if got := cms[0].Annotations[journal.ShardsAnnotation]; got != fmt.Sprint(len(cms)) {
		t.Errorf("first ConfigMap says %q shards are in use, %d exist", got, len(cms))
	}
	t.Logf("%d operations in %d ConfigMaps with %d writes", entries, len(cms), writes)

	// A restart reads exactly the ConfigMaps in use, writes nothing, and
	// resumes every operation.
	objects := []runtime.Object{sc}
	for _, cm := range cms {
		objects = append(objects, cm)
	}
	second := newFixture(t, newStore(t), nil, append(objects, f.keySecret())...)
	if err := second.c.resumeOperations(second.ctx); err != nil {
		t.Fatal(err)
	}
	if got := second.c.claimQueue.Len(); got != len(claims) {
		t.Fatalf("restart resumed %d operations, want %d", got, len(claims))
	}
	if gets, all := second.writes("get", "configmaps"), second.callsBut("secrets"); gets != len(cms) || all != gets {
		t.Fatalf("restart made %d calls (%d ConfigMap reads), want one read per ConfigMap in use (%d)", all, gets, len(cms))
	}
	second.c.journal.Flush(second.ctx)
	if n := second.callsBut("secrets"); n != len(cms) {
		t.Fatalf("restart wrote the journal unchanged (%d calls)", n)
	}
}

func TestJournalSpillsOnlyWhenTheFirstConfigMapIsFull(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	recordAll(t, f, manyClaims(200, 2, "gold"), class("gold"), 20)
	if cms := f.journalConfigMaps(); len(cms) != 1 || cms[0].Annotations[journal.ShardsAnnotation] != "" {
		t.Fatalf("200 operations used %d ConfigMaps (annotations %v), want the first only, as before shards", len(cms), cms[0].Annotations)
	}

	// Full: the next entry goes to the second ConfigMap, written after the
	// first says two are in use. Removals free room in the first again.
	f.c.journal.SetBounds(f.c.journal.Size(0), 0)
	f.client.ClearActions()
	recordAll(t, f, []*corev1.PersistentVolumeClaim{claim("spill", "gold")}, class("gold"), 1)
	cms := f.journalConfigMaps()
	if len(cms) != 2 || cms[1].Data["pvc-uid-spill"] == "" || cms[0].Annotations[journal.ShardsAnnotation] != "2" {
		t.Fatalf("entry beyond the first ConfigMap's room: %d ConfigMaps, second %v, annotations %v", len(cms), cms[1], cms[0].Annotations)
	}
	var order []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			order = append(order, a.GetVerb()+" "+a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap).Name)
		}
	}
	if len(order) != 2 || !strings.HasSuffix(order[1], "-inflight-1") {
		t.Fatalf("writes %v: the first ConfigMap must say a second is in use before that one is written", order)
	}
	f.c.journal.Forget("pvc-uid-c0")
	recordAll(t, f, []*corev1.PersistentVolumeClaim{claim("again", "gold")}, class("gold"), 1)
	if f.journalConfigMaps()[0].Data["pvc-uid-again"] == "" {
		t.Fatal("room freed in the first ConfigMap was not used")
	}
}

func TestJournalOneNamespaceBoundCountsEveryConfigMap(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	f.c.journal.SetBounds(4096, 3*4096)
	var refused []string
	for _, pvc := range manyClaims(100, 1, "gold") {
		if err := f.c.journal.Record(f.ctx, f.c.cfg.volumeName(pvc), journal.Entry{Claim: pvc, Class: class("gold")}); errors.Is(err, journal.ErrNamespaceFull) {
			refused = append(refused, pvc.Name)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if len(refused) == 0 || len(f.journalConfigMaps()) < 3 {
		t.Fatalf("one namespace filled %d ConfigMaps with %d refusals", len(f.journalConfigMaps()), len(refused))
	}
	other := claim("other", "gold", func(c *corev1.PersistentVolumeClaim) { c.Namespace = "calm" })
	if err := f.c.journal.Record(f.ctx, "pvc-uid-other", journal.Entry{Claim: other, Class: class("gold")}); err != nil {
		t.Fatalf("another namespace's claim was refused: %v", err)
	}
}

func TestJournalGracefulStopPatchesEveryConfigMap(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	f.c.journal.SetBounds(4096, 0)
	claims := manyClaims(30, 1, "gold")
	recordAll(t, f, claims, class("gold"), 1)
	if len(f.journalConfigMaps()) < 3 {
		t.Fatal("setup: want entries in several ConfigMaps")
	}
	for _, pvc := range claims {
		f.c.journal.Forget(f.c.cfg.volumeName(pvc))
	}
	f.client.ClearActions()
	if err := f.c.journal.FlushRemovals(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Besides the patches, one update of the key Secret: the journal's
	// generation moves on before removals are written.
	if patches, all := f.writes("patch", "configmaps"), len(f.client.Actions()); patches != len(f.journalConfigMaps()) || all != patches+1 || f.writes("update", "secrets") != 1 {
		t.Fatalf("%d calls, %d patches for %d ConfigMaps", all, patches, len(f.journalConfigMaps()))
	}
	for i, cm := range f.journalConfigMaps() {
		for k := range cm.Data {
			if !journal.IsClassKey(k) {
				t.Errorf("ConfigMap %d still holds %s after the graceful stop", i, k)
			}
		}
	}
}

// An upgrade: the earlier version left one ConfigMap of unsigned entries,
// each with its class inline. Nothing is done on their word: the entry of a
// claim that still waits is replaced by the claim's own, one whose volume
// was saved is dropped, and one of a deleted claim is left in place and
// reported, its asset untouched.
func TestUnsignedEntriesOfAnEarlierVersionAreNotActedOn(t *testing.T) {
	waiting, gone, saved := claim("c", "gold"), claim("gone", "gold"), claim("saved", "gold")
	inline := func(pvc *corev1.PersistentVolumeClaim) string {
		b, _ := json.Marshal(journal.Entry{Claim: journal.StrippedClaim(pvc, nil, nil, systemClaimAnnotations), Class: journal.StrippedClass(class("gold"))})
		return string(b)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: JournalName(testProvisioner, ""), Namespace: OutOfClusterNamespace},
		Data: map[string]string{"pvc-uid-c": inline(waiting), "pvc-uid-gone": inline(gone), "pvc-uid-saved": inline(saved)}}
	savedPV := releasedPV("pvc-uid-saved", corev1.PersistentVolumeReclaimDelete, func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = claimRef(saved)
		pv.Status.Phase = corev1.VolumeBound
	})
	store := newStore(t)
	if err := os.Mkdir(filepath.Join(store.root, "pvc-uid-gone"), 0o700); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, store, nil, class("gold"), waiting, savedPV, cm)
	if err := f.c.resumeOperations(f.ctx); err != nil {
		t.Fatal(err)
	}
	if f.c.claimQueue.Len() != 0 || f.c.operations.get("pvc-uid-gone") != nil {
		t.Fatal("an unsigned entry was resumed")
	}
	if n := f.writes("get", "configmaps"); n != 1 {
		t.Fatalf("read %d ConfigMaps of a journal without shards, want 1", n)
	}
	f.requireEvent(EventProvisioningCleanupSkipped, `In-flight journal entry "pvc-uid-gone"`)
	for _, e := range f.pendingEvents() {
		if e.Reason == EventProvisioningCleanupSkipped && e.Ref.Name != "gone" {
			t.Errorf("warning about entry of claim %s, whose operation is not in doubt", e.Ref.Name)
		}
	}
	// The waiting claim is provisioned as any other.
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	f.c.journal.Flush(f.ctx)
	if f.pv("pvc-uid-c") == nil || !slices.Equal(store.assets(t), []string{"pvc-uid-c", "pvc-uid-gone"}) || len(store.deletes) != 0 {
		t.Fatalf("PV %v, assets %v, deletes %v", f.pv("pvc-uid-c") != nil, store.assets(t), store.deletes)
	}
	if keys := f.journalKeys(); !slices.Equal(keys, []string{"pvc-uid-gone"}) {
		t.Fatalf("journal holds %v, want only the entry left for an admin", keys)
	}
}

func TestJournalEntriesOfShardsAreCheckedLikeAnyOther(t *testing.T) {
	name := JournalName(testProvisioner, "")
	ours, _ := json.Marshal(journal.StrippedClass(class("gold")))
	theirs, _ := json.Marshal(journal.StrippedClass(class("gold", func(sc *storagev1.StorageClass) { sc.Provisioner = "other.example.com/driver" })))
	entry := func(claimName, classKey, classData string) string {
		return signedTestEntry("pvc-uid-"+claimName, journal.Entry{Claim: journal.StrippedClaim(claim(claimName, "gold"), nil, nil, systemClaimAnnotations), ClassKey: classKey}, classData)
	}
	first := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: OutOfClusterNamespace,
		Annotations: map[string]string{journal.ShardsAnnotation: "2"}},
		Data: map[string]string{journal.ClassKey(ours): string(ours), "pvc-uid-a": entry("a", journal.ClassKey(ours), string(ours))}}
	second := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: OutOfClusterNamespace},
		Data: map[string]string{
			journal.ClassKey(theirs): string(theirs),
			"pvc-uid-a":              entry("a", journal.ClassKey(theirs), string(theirs)), // a second entry of one volume
			"pvc-uid-b":              entry("b", journal.ClassKey(theirs), string(theirs)), // a class of another provisioner
			"pvc-uid-c":              entry("c", journal.ClassKey(ours), string(ours)),     // a class only another ConfigMap has
			"pvc-uid-d":              entry("d", "_class.missing", ""),
		}}
	// Beyond what the first ConfigMap says is in use: never read.
	third := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-2", Namespace: OutOfClusterNamespace},
		Data: map[string]string{journal.ClassKey(ours): string(ours), "pvc-uid-e": entry("e", journal.ClassKey(ours), string(ours))}}
	store := newStore(t)
	f := newFixture(t, store, nil, class("gold"), first, second, third, journalKeySecret())
	if err := f.c.resumeOperations(f.ctx); err != nil {
		t.Fatal(err)
	}
	for _, pv := range []string{"pvc-uid-b", "pvc-uid-c", "pvc-uid-d", "pvc-uid-e"} {
		if f.c.journal.Has(pv) || f.c.operations.get(pv) != nil {
			t.Errorf("entry %s acted on", pv)
		}
	}
	if op := f.c.operations.get("pvc-uid-a"); op == nil || op.entry.Class.Provisioner != testProvisioner {
		t.Fatalf("the controller's own entry: %+v", op)
	}
	// The next write of the second ConfigMap removes what was dropped, and
	// leaves what cannot be verified (its class is not beside it) as it is.
	f.c.journal.Flush(f.ctx)
	cm, _ := f.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(f.ctx, name+"-1", metav1.GetOptions{})
	var left []string
	for k, v := range cm.Data {
		if !journal.IsClassKey(k) {
			left = append(left, k)
			if v != second.Data[k] {
				t.Errorf("entry %s changed", k)
			}
		}
	}
	if slices.Sort(left); !slices.Equal(left, []string{"pvc-uid-c", "pvc-uid-d"}) {
		t.Errorf("second ConfigMap holds %v, want only the unverifiable entries", left)
	}
}

func TestJournalWriteOfTheFirstConfigMapFailingHoldsTheOthers(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	f.c.journal.SetBounds(2048, 0)
	recordAll(t, f, manyClaims(3, 1, "gold"), class("gold"), 1)
	f.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).Name == JournalName(testProvisioner, "") {
			return true, nil, errors.New("etcd unavailable")
		}
		return false, nil, nil
	})
	// Fill the first ConfigMap so that the next entry needs a second one.
	f.c.journal.SetBounds(f.c.journal.Size(0), 0)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	err := f.c.journal.Record(ctx, "pvc-uid-late", journal.Entry{Claim: claim("late", "gold"), Class: class("gold")})
	if err == nil {
		t.Fatal("recorded in a second ConfigMap that the first does not name")
	}
	if _, ok := f.journalConfigMaps()[1]; ok {
		t.Fatal("second ConfigMap written although the first could not say it is in use")
	}
}

// A class that changed (a new resource version) is recorded as it is now,
// and entries of the same class share one copy of it.
func TestJournalRecordsTheClassAsItIsNow(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	gold := class("gold", func(sc *storagev1.StorageClass) {
		sc.ResourceVersion, sc.Parameters = "1", map[string]string{"tier": "a"}
	})
	recordAll(t, f, []*corev1.PersistentVolumeClaim{claim("a", "gold"), claim("b", "gold")}, gold, 1)
	changed := gold.DeepCopy()
	changed.ResourceVersion, changed.Parameters = "2", map[string]string{"tier": "b"}
	recordAll(t, f, []*corev1.PersistentVolumeClaim{claim("c", "gold")}, changed, 1)
	data := f.journalConfigMaps()[0].Data
	var classes []string
	for k, v := range data {
		if journal.IsClassKey(k) {
			classes = append(classes, v)
		}
	}
	slices.Sort(classes)
	if len(classes) != 2 || !strings.Contains(classes[0], `"tier":"a"`) || !strings.Contains(classes[1], `"tier":"b"`) {
		t.Fatalf("classes in the journal: %v, want one with tier a (claims a and b) and one with tier b (claim c)", classes)
	}
}
