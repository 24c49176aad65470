// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// waitForMessageOr waits until obj has an event of eventType whose message
// contains want, or until gone says that what the event is about was
// destroyed instead; it reports whether the event came.
func waitForMessageOr(t *testing.T, ctx context.Context, obj *corev1.PersistentVolumeClaim, eventType, want string, gone func() bool) (found bool) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, client, obj)
		seen = seen[:0]
		for _, ev := range events {
			if ev.Type == eventType && strings.Contains(ev.Message, want) {
				found = true
				return true, nil
			}
			seen = append(seen, ev.Message)
		}
		return gone(), err
	})
	if err != nil {
		t.Fatalf("no %s event on %s/%s containing %q; seen: %q", eventType, obj.Namespace, obj.Name, want, seen)
	}
	return found
}

// journalValue returns the journal's value under key ("" if it has none).
func journalValue(ctx context.Context, t *testing.T, name, key string) string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(controller.OutOfClusterNamespace).Get(ctx, controller.JournalName(name, ""), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[key]
}

// Someone who can write ConfigMaps in the provisioner's namespace, but not
// read its Secrets, plants a journal entry of the right shape for a retained
// volume whose PV an admin deleted. A restarted controller does not delete
// the volume on its word: it leaves the entry and reports it on the claim.
func TestPlantedJournalEntryDoesNotDeleteARetainedVolume(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	name := uniqueName("planted")
	store := newStore(t)
	stop := runController(t, name, store)
	class := retainClass(t, name)
	ns := cp.CreateTestNamespace(t, "planted")

	pvc := createClaim(t, ctx, framework.NewPVC(ns, "kept", class, "1Gi"))
	pv := keptByAnAdmin(t, ctx, pvc)
	stop()

	// The entry an earlier version wrote, or anyone can: the claim's
	// identity and a class of this provisioner, no signature.
	planted, err := json.Marshal(map[string]any{
		"claim": map[string]any{"metadata": map[string]any{"name": pvc.Name, "namespace": ns, "uid": pvc.UID}, "spec": pvc.Spec},
		"class": map[string]any{"metadata": map[string]any{"name": class}, "provisioner": name},
	})
	if err != nil {
		t.Fatal(err)
	}
	journal := controller.JournalName(name, "")
	cm, err := client.CoreV1().ConfigMaps(controller.OutOfClusterNamespace).Get(ctx, journal, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[pv.Name] = string(planted)
	if _, err := client.CoreV1().ConfigMaps(controller.OutOfClusterNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	runController(t, name, store)
	assetGone := func() bool {
		assets, _ := store.Assets()
		return !slices.Contains(assets, pv.Name)
	}
	warned := waitForMessageOr(t, ctx, pvc, corev1.EventTypeWarning, `In-flight journal entry "`+pv.Name+`"`, assetGone)
	if assetGone() {
		t.Fatalf("the retained volume %s was deleted on the word of a planted journal entry", pv.Name)
	}
	if !warned {
		t.Fatal("no warning about the planted entry")
	}
	if journalValue(ctx, t, name, pv.Name) != string(planted) {
		t.Error("the planted entry was not left as it was")
	}
}

// subdirPort is shaped like a third party's port of
// nfs-subdir-external-provisioner that omits the optional ClaimMetadataKeys:
// each volume is the directory <namespace>/<annotation example.com/dir>
// under root, and Delete removes the directory its PV names. While hold is
// set, Provision creates the directory and answers "in progress".
type subdirPort struct {
	root string
	hold atomic.Bool

	mu      sync.Mutex
	deletes []string
}

func (p *subdirPort) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	dir := filepath.Join(o.PVC.Namespace, o.PVC.Annotations["example.com/dir"])
	if err := os.MkdirAll(filepath.Join(p.root, dir), 0o700); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if p.hold.Load() {
		return nil, controller.ProvisioningInBackground, errors.New("the backend is still creating the volume")
	}
	return o.NewVolume(controller.VolumeSpec{Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}), "", nil
}

func (p *subdirPort) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	p.mu.Lock()
	p.deletes = append(p.deletes, pv.Spec.HostPath.Path)
	p.mu.Unlock()
	return os.RemoveAll(filepath.Join(p.root, pv.Spec.HostPath.Path))
}

func (p *subdirPort) deleted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.deletes)
}

// A claim is deleted while the provisioner is down in the middle of its
// operation. After the restart, the port is not asked for the volume again
// with the journal's copy of the claim (its annotation gone, the directory
// would be the namespace's) and nothing is deleted: the other volume's data
// survives, and the volume whose asset may be left is named in a Warning
// event and kept in the journal.
func TestResumeOfAPortWithoutClaimMetadataKeysDeletesNothing(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	name := uniqueName("port")
	port := &subdirPort{root: t.TempDir()}
	stop := runController(t, name, port)
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "port")
	withDir := func(claimName, dir string) *corev1.PersistentVolumeClaim {
		pvc := framework.NewPVC(ns, claimName, sc.Name, "1Gi")
		pvc.Annotations = map[string]string{"example.com/dir": dir}
		return createClaim(t, ctx, pvc)
	}

	// A bound volume of the namespace, with data.
	withDir("bound", "other")
	if _, _, err := framework.WaitForPVCBound(ctx, client, ns, "bound"); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(port.root, ns, "other", "file")
	if err := os.WriteFile(data, []byte("a tenant's data"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A claim whose volume the backend is still making when the provisioner stops.
	port.hold.Store(true)
	victim := withDir("victim", "mine")
	pvName := "pvc-" + string(victim.UID)
	if err := waitForFile(ctx, filepath.Join(port.root, ns, "mine")); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitForEvent(ctx, client, victim, controller.EventProvisioningFailed); err != nil {
		t.Fatal(err)
	}
	stop()
	deleteClaim(t, ctx, ns, victim.Name)
	if err := framework.WaitForPVCDeleted(ctx, client, ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	if journalValue(ctx, t, name, pvName) == "" {
		t.Fatal("setup: the operation is not in the journal")
	}

	port.hold.Store(false)
	runController(t, name, port)
	dataGone := func() bool {
		_, err := os.Stat(data)
		return err != nil
	}
	warned := waitForMessageOr(t, ctx, victim, corev1.EventTypeWarning, "an asset made for volume "+pvName+" may be left on the backend", dataGone)
	if dataGone() {
		t.Fatalf("the data of another volume of the namespace is gone; Delete removed %q", port.deleted())
	}
	if d := port.deleted(); len(d) != 0 {
		t.Fatalf("Delete called for %q on a guessed claim", d)
	}
	if !warned {
		t.Fatal("the possible leak was not reported")
	}
	if _, err := os.Stat(filepath.Join(port.root, ns, "mine")); err != nil {
		t.Errorf("the asset that may be left: %v", err)
	}
	if journalValue(ctx, t, name, pvName) == "" {
		t.Error("the entry was not kept for an admin")
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PV of the deleted claim: %v", err)
	}
	if _, _, err := framework.WaitForPVCBound(ctx, client, ns, "bound"); err != nil {
		t.Error(err)
	}
}

var _ controller.Provisioner = (*subdirPort)(nil)
