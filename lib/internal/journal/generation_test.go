// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// entryOf returns a copy of testEntry for another claim.
func entryOf(name string) Entry {
	e := testEntry()
	e.Claim = e.Claim.DeepCopy()
	e.Claim.Name, e.Claim.UID = name, types.UID("uid-"+name)
	return e
}

func (j *Journal) onServer(t *testing.T, client *fake.Clientset) map[string]string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(j.namespace).Get(t.Context(), j.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

func (j *Journal) writeBack(t *testing.T, client *fake.Clientset, data map[string]string) {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(j.namespace).Get(t.Context(), j.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(cm.Data, data)
	if _, err := client.CoreV1().ConfigMaps(j.namespace).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// recordedAB is a journal on client, removals written with every write,
// holding entries pvc-uid-a and pvc-uid-b.
func recordedAB(t *testing.T, client *fake.Clientset) (*Journal, context.Context) {
	t.Helper()
	j, ctx := newTestJournal(t, client)
	j.SetAdvanceDelay(0)
	for _, name := range []string{"a", "b"} {
		if err := j.Record(ctx, "pvc-uid-"+name, entryOf(name)); err != nil {
			t.Fatal(err)
		}
	}
	return j, ctx
}

// A removal is written only after the journal's generation moved on, and
// the live entries, signed again over it, go with it: a genuine entry kept
// from before and written back is refused at the next load, the live one
// is not.
func TestEntryKeptFromBeforeARemovalIsRefused(t *testing.T) {
	client := fake.NewClientset()
	j, ctx := recordedAB(t, client)
	kept := map[string]string{"pvc-uid-a": j.onServer(t, client)["pvc-uid-a"]}
	j.Forget("pvc-uid-a")
	j.Flush(ctx)
	if _, ok := j.onServer(t, client)["pvc-uid-a"]; ok {
		t.Fatal("setup: the removal was not written")
	}
	j.writeBack(t, client, kept)

	again, _ := newTestJournal(t, client)
	entries, unverified, err := again.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := entries["pvc-uid-b"]; !ok || len(entries) != 1 {
		t.Fatalf("loaded %d entries, want only the live entry pvc-uid-b", len(entries))
	}
	if u, ok := unverified["pvc-uid-a"]; !ok || !strings.Contains(u.Reason, "older than the last completions") {
		t.Fatalf("kept entry: %+v, want it refused as older than the removal", unverified["pvc-uid-a"])
	}
}

// A crash after the generation moved and before the ConfigMap was written
// (here: the write fails) can only lose entries, never make a removed one
// count again: at the next load every entry of the old generation is
// refused.
func TestCrashBetweenTheGenerationAndTheRemovalOnlyLeaks(t *testing.T) {
	client := fake.NewClientset()
	j, ctx := recordedAB(t, client)
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("killed")
	})
	j.Forget("pvc-uid-a")
	j.Flush(ctx)
	client.ReactionChain = client.ReactionChain[1:]

	again, _ := newTestJournal(t, client)
	entries, unverified, err := again.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 || len(unverified) != 2 {
		t.Fatalf("loaded %d entries and %d refused, want none loaded and both refused", len(entries), len(unverified))
	}
}

// In a burst, removals wait for the generation's next move: many journal
// writes that carry removals cost one write of the key Secret.
func TestRemovalsOfABurstShareOneMoveOfTheGeneration(t *testing.T) {
	client := fake.NewClientset()
	j, ctx := newTestJournal(t, client)
	if _, _, err := j.Load(ctx); err != nil { // creates and seals the key Secret
		t.Fatal(err)
	}
	client.ClearActions()
	for i := range 20 {
		name := "c" + string(rune('a'+i))
		if err := j.Record(ctx, "pvc-uid-"+name, entryOf(name)); err != nil {
			t.Fatal(err)
		}
		j.Forget("pvc-uid-" + name)
	}
	j.Flush(ctx)
	updates := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "secrets" {
			updates++
		}
	}
	if updates > 1 {
		t.Fatalf("%d updates of the key Secret for 20 records and removals, want at most 1", updates)
	}
	if err := j.FlushRemovals(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range j.onServer(t, client) {
		if !IsClassKey(k) {
			t.Errorf("entry %s left after the graceful stop", k)
		}
	}
}
