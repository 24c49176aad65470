// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

// idStore records each asset's ID (its directory's name) once it exists,
// and deletes by it, as a CSI driver's port does.
type idStore struct{ *dirstore.Store }

func (s idStore) DeleteRecordedAsset(ctx context.Context, _ controller.ProvisionOptions, id string) error {
	return s.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: id}})
}

// retainClass creates a StorageClass of provisioner name that keeps volumes.
func retainClass(t *testing.T, name string) string {
	t.Helper()
	sc := framework.NewStorageClass(className(name), name, nil)
	retain := corev1.PersistentVolumeReclaimRetain
	sc.ReclaimPolicy = &retain
	cp.CreateTestStorageClass(t, sc)
	return sc.Name
}

// keptByAnAdmin waits for pvc (of a Retain class) to be bound, deletes it,
// and deletes its Released PV as an admin does to keep the data; it returns
// the PV as it was.
func keptByAnAdmin(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	_, pv, err := framework.WaitForPVCBound(ctx, client, pvc.Namespace, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	deleteClaim(t, ctx, pvc.Namespace, pvc.Name)
	if _, err := framework.WaitForPVPhase(ctx, client, pv.Name, corev1.VolumeReleased); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, client, pv.Name); err != nil {
		t.Fatal(err)
	}
	return pv
}

// Issue 36 case 1. Someone who can read and write ConfigMaps in the
// provisioner's namespace keeps the journal's genuine entry of a claim,
// with its asset ID, while it is provisioned. The claim (class Retain) is
// deleted, an admin deletes the Released PV to keep the data, the kept
// entry is written back, and the provisioner (no leader election, as a
// node-local DaemonSet) starts again. The retained asset survives, and a
// Warning event on the claim says why the entry was not used.
func TestReplayedJournalEntryDoesNotDeleteARetainedVolume(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	name := uniqueName("replayed")
	store := idStore{newStore(t)}
	release := make(chan struct{})
	store.AfterCreate = func(ctx context.Context, o controller.ProvisionOptions) {
		o.RecordAssetID(o.PVName)
		select { // until the entry with the ID has been copied
		case <-release:
		case <-ctx.Done():
		}
	}
	stop := runController(t, name, store)
	ns := cp.CreateTestNamespace(t, "replayed")
	pvc := createClaim(t, ctx, framework.NewPVC(ns, "kept", retainClass(t, name), "1Gi"))
	pvName := "pvc-" + string(pvc.UID)

	var kept map[string]string
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cm, err := client.CoreV1().ConfigMaps(controller.OutOfClusterNamespace).Get(ctx, controller.JournalName(name, ""), metav1.GetOptions{})
		if err == nil && strings.Contains(cm.Data[pvName], `"assetID":"`+pvName+`"`) {
			kept = maps.Clone(cm.Data)
			return true, nil
		}
		return false, nil
	})
	close(release)
	if err != nil {
		t.Fatalf("the journal never held the entry with the asset ID: %v", err)
	}
	keptByAnAdmin(t, ctx, pvc)
	stop()
	if journalValue(ctx, t, name, pvName) != "" {
		t.Fatal("setup: the completed operation is still in the journal after a graceful stop")
	}

	cm, err := client.CoreV1().ConfigMaps(controller.OutOfClusterNamespace).Get(ctx, controller.JournalName(name, ""), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil { // the stop removed every entry
		cm.Data = map[string]string{}
	}
	maps.Copy(cm.Data, kept)
	if _, err := client.CoreV1().ConfigMaps(controller.OutOfClusterNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	runController(t, name, store)
	assetGone := func() bool {
		assets, _ := store.Assets()
		return !slices.Contains(assets, pvName)
	}
	warned := waitForMessageOr(t, ctx, pvc, corev1.EventTypeWarning, `In-flight journal entry "`+pvName+`"`, assetGone)
	if assetGone() {
		t.Fatalf("the retained volume %s was deleted on the word of a replayed journal entry", pvName)
	}
	if !warned {
		t.Fatal("no warning about the replayed entry")
	}
	if !waitForMessageOr(t, ctx, pvc, corev1.EventTypeWarning, "older than the last completions the journal wrote", assetGone) {
		t.Fatalf("the retained volume %s was deleted on the word of a replayed journal entry", pvName)
	}
}

// Issue 36 case 2. Someone who can create, but not read or update, Secrets
// in the provisioner's namespace creates its journal key Secret before the
// first start, with a key they know (with which they could sign entries
// that delete a retained volume). The provisioner refuses the key: no
// volume is provisioned with it, and the waiting claim gets a Warning event
// naming the Secret and saying what to do.
func TestPlantedJournalKeyIsRefused(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("planted-key")
	home := cp.CreateTestNamespace(t, "planted-key-home")
	planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: controller.JournalKeySecret, Namespace: home},
		Data: map[string][]byte{"key": []byte(strings.Repeat("known to the attacker.", 2))}}
	if _, err := client.CoreV1().Secrets(home).Create(ctx, planted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	runController(t, name, store, controller.WithJournal(home, "planted-inflight"))
	ns := cp.CreateTestNamespace(t, "planted-key")
	pvc := createClaim(t, ctx, framework.NewPVC(ns, "data", retainClass(t, name), "1Gi"))
	bound := func() bool {
		got, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound
	}
	warned := waitForMessageOr(t, ctx, pvc, corev1.EventTypeWarning, "Secret "+home+"/"+controller.JournalKeySecret+" was not created by the provisioner", bound)
	if bound() || !warned {
		t.Fatalf("the claim was provisioned with a journal key someone else created (bound %v, warned %v)", bound(), warned)
	}
	if assets, _ := store.Assets(); len(assets) != 0 {
		t.Fatalf("assets %v made with a planted key", assets)
	}
}
