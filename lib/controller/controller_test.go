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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/internal/events"
	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/kubeprov/external-storage/lib/recordkey"
)

const testProvisioner = "test.kubeprov.io/dir"

// dirStore is a Provisioner whose assets are directories, so tests can count
// what exists. What each call does is scripted.
type dirStore struct {
	root string

	mu         sync.Mutex
	provisions []ProvisionOptions
	deletes    []string
	provisionF func(n int, o ProvisionOptions) (ProvisioningState, error) // nil: succeed
	deleteF    func(pv *corev1.PersistentVolume) error
}

func (d *dirStore) Provision(_ context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	d.mu.Lock()
	d.provisions = append(d.provisions, o)
	n := len(d.provisions)
	f := d.provisionF
	d.mu.Unlock()
	if f != nil {
		if state, err := f(n, o); err != nil {
			return nil, state, err
		}
	}
	path := filepath.Join(d.root, o.PVName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, ProvisioningFinished, err
	}
	return o.NewVolume(VolumeSpec{Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}), ProvisioningFinished, nil
}

func (d *dirStore) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	d.mu.Lock()
	d.deletes = append(d.deletes, pv.Name)
	f := d.deleteF
	d.mu.Unlock()
	if f != nil {
		if err := f(pv); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(d.root, pv.Name))
}

func (d *dirStore) assets(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(d.root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func (d *dirStore) provisionCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.provisions)
}

type blockDirStore struct{ *dirStore }

func (blockDirStore) SupportsBlock(context.Context) bool { return true }

type fixture struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	store  *dirStore
	c      *ProvisionController
}

func newFixture(t *testing.T, p Provisioner, opts []Option, objects ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	client := fake.NewClientset(objects...)
	store, _ := p.(*dirStore)
	opts = append([]Option{WithRetryInterval(time.Millisecond, 10*time.Millisecond), WithEventFlushInterval(time.Hour)}, opts...)
	c, err := NewProvisionController(client, testProvisioner, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objects {
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			_ = c.claimInformer.GetIndexer().Add(o)
		case *corev1.PersistentVolume:
			_ = c.volumeInformer.GetIndexer().Add(o)
		case *storagev1.StorageClass:
			_ = c.classInformer.GetIndexer().Add(o)
		case *corev1.Node:
			if c.nodeInformer != nil {
				_ = c.nodeInformer.GetIndexer().Add(o)
			}
		}
	}
	// Removals are written with the next write, as before the generation
	// (lib/internal/journal advance) made them wait for its next move.
	c.journal.SetAdvanceDelay(0)
	go c.journal.Run(ctx)
	return &fixture{t: t, ctx: ctx, client: client, store: store, c: c}
}

func newStore(t *testing.T) *dirStore { return &dirStore{root: t.TempDir()} }

func class(name string, mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("sc-" + name)}, Provisioner: testProvisioner}
	for _, m := range mutate {
		m(sc)
	}
	return sc
}

func claim(name, className string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1",
			Annotations: map[string]string{AnnStorageProvisioner: testProvisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func (f *fixture) pendingEvents() []events.Pending { return f.c.events.Pending() }

func (f *fixture) requireEvent(reason, substring string) {
	f.t.Helper()
	for _, e := range f.pendingEvents() {
		if e.Reason == reason && strings.Contains(e.Message, substring) {
			return
		}
	}
	f.t.Fatalf("no %s event containing %q; events: %+v", reason, substring, f.pendingEvents())
}

func (f *fixture) writes(verb, resource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func (f *fixture) pv(name string) *corev1.PersistentVolume {
	pv, err := f.client.CoreV1().PersistentVolumes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return pv
}

// journalKeySecret is the journal's signing key as a test plants it: tests
// that write a journal by hand sign its entries with it (signedTestEntry).
func journalKeySecret() *corev1.Secret {
	// Sealed as the controller seals the Secret it creates (gate.SealedSecret).
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: JournalKeySecret, Namespace: OutOfClusterNamespace,
		UID: "journal-key-uid", Annotations: map[string]string{gate.SealAnnotation: "journal-key-uid"}},
		Data: map[string][]byte{recordkey.SecretField: []byte(strings.Repeat("k", recordkey.KeyBytes))}}
}

// signedTestEntry is what the controller writes for e under key pvName,
// signed with journalKeySecret's key.
func signedTestEntry(pvName string, e journal.Entry, classData string) string {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	return journal.SignedEntry(journalKeySecret().Data[recordkey.SecretField], OutOfClusterNamespace, JournalName(testProvisioner, ""), pvName, b, classData)
}

// keySecret returns the journal key a fixture's controller created, for a
// second controller of the same provisioner.
func (f *fixture) keySecret() *corev1.Secret {
	f.t.Helper()
	s, err := f.client.CoreV1().Secrets(OutOfClusterNamespace).Get(f.ctx, JournalKeySecret, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// restarted is a new controller of the same provisioner over p, holding f's
// journal (first changed by change, if not nil), its key and objects, that
// has read its journal as at a start.
func (f *fixture) restarted(p Provisioner, change func(*corev1.ConfigMap), objects ...runtime.Object) *fixture {
	f.t.Helper()
	return f.restartedUnder(nil, p, change, objects...)
}

// restartedUnder is restarted for a controller that holds the leader Lease
// term term (nil: no leader election) when it reads its journal.
func (f *fixture) restartedUnder(term *journal.LeaseTerm, p Provisioner, change func(*corev1.ConfigMap), objects ...runtime.Object) *fixture {
	f.t.Helper()
	journal, err := f.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(f.ctx, JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if change != nil {
		change(journal)
	}
	second := newFixture(f.t, p, nil, append(objects, journal, f.keySecret())...)
	second.c.journal.Term.Store(term)
	if err := second.c.resumeOperations(second.ctx); err != nil {
		f.t.Fatal(err)
	}
	return second
}

// callsBut counts the API calls made, except those on resource.
func (f *fixture) callsBut(resource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource != resource {
			n++
		}
	}
	return n
}

func (f *fixture) journalKeys() []string {
	cm, err := f.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(f.ctx, JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var keys []string
	for k := range cm.Data {
		if !journal.IsClassKey(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func TestProvisionSavesCompletePV(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	sc := class("gold", func(sc *storagev1.StorageClass) {
		sc.ReclaimPolicy = &retain
		sc.MountOptions = []string{"noatime"}
	})
	pvc := claim("data", "gold")
	f := newFixture(t, newStore(t), []Option{WithFinalizer(true)}, sc, pvc)

	if err := f.c.syncClaim(f.ctx, "ns/data"); err != nil {
		t.Fatal(err)
	}
	pv := f.pv("pvc-uid-data")
	if pv == nil {
		t.Fatal("PV not created")
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Spec.ClaimRef.Name != "data" {
		t.Errorf("claimRef = %+v", pv.Spec.ClaimRef)
	}
	if pv.Annotations[AnnProvisionedBy] != testProvisioner {
		t.Errorf("provisioned-by = %q", pv.Annotations[AnnProvisionedBy])
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != retain || pv.Spec.StorageClassName != "gold" ||
		!slices.Equal(pv.Spec.MountOptions, []string{"noatime"}) || !slices.Contains(pv.Finalizers, VolumeFinalizer) {
		t.Errorf("PV spec not completed from the class: %+v, finalizers %v", pv.Spec, pv.Finalizers)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "1Gi" {
		t.Errorf("capacity = %s", q.String())
	}
	if got := f.store.assets(t); !slices.Equal(got, []string{"pvc-uid-data"}) {
		t.Errorf("assets = %v", got)
	}
	f.requireEvent(EventProvisioningSucceeded, "pvc-uid-data")
	// The journal recorded the operation before Provision and forgets it after.
	if f.c.journal.Has("pvc-uid-data") {
		t.Error("journal still holds a finished operation")
	}
	if f.writes("create", "configmaps") != 1 {
		t.Errorf("journal writes = %d, want 1 before provisioning", f.writes("create", "configmaps"))
	}
	// A second sync (resync, or the PV seen in the cache) does nothing.
	_ = f.c.volumeInformer.GetIndexer().Add(pv)
	if err := f.c.syncClaim(f.ctx, "ns/data"); err != nil || f.store.provisionCount() != 1 {
		t.Fatalf("second sync provisioned again: calls %d, err %v", f.store.provisionCount(), err)
	}
}

// A claim synced after its PV was saved but before the informer saw the PV
// (an update of the claim, a retry) is not recorded and provisioned again:
// one Provision, one journal write, one ProvisioningSucceeded. Once the
// informer has seen the PV come and go, the claim is provisioned again.
func TestClaimSyncedBeforeItsPVIsCached(t *testing.T) {
	f := newFixture(t, newStore(t), nil, class("gold"), claim("data", "gold"))
	for range 2 {
		if err := f.c.syncClaim(f.ctx, "ns/data"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.store.provisionCount(); n != 1 {
		t.Errorf("Provision called %d times, want 1", n)
	}
	if n := f.writes("create", "configmaps") + f.writes("update", "configmaps"); n != 1 {
		t.Errorf("journal writes = %d, want 1", n)
	}
	succeeded := 0
	for _, e := range f.pendingEvents() {
		if e.Reason == EventProvisioningSucceeded {
			succeeded++
		}
	}
	if succeeded != 1 {
		t.Errorf("%d ProvisioningSucceeded events, want 1", succeeded)
	}

	pv := f.pv("pvc-uid-data")
	f.c.volumeChanged(pv)
	f.c.volumeDeleted(pv)
	if err := f.c.syncClaim(f.ctx, "ns/data"); err != nil {
		t.Fatal(err)
	}
	if n := f.store.provisionCount(); n != 2 {
		t.Errorf("after the PV was seen and deleted, Provision called %d times in all, want 2", n)
	}
}

func TestClaimsNotToProvision(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	other := class("other", func(sc *storagev1.StorageClass) { sc.Provisioner = "someone.else/x" })
	late := class("late", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })
	for name, pvc := range map[string]*corev1.PersistentVolumeClaim{
		"bound":                  claim("c", "gold", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" }),
		"another provisioner":    claim("c", "gold", func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnStorageProvisioner] = "x/y" }),
		"class of another":       claim("c", "other"),
		"waiting for a consumer": claim("c", "late"),
		"being deleted":          claim("c", "gold", func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &metav1.Time{Time: time.Now()} }),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newStore(t), nil, class("gold"), other, late, pvc)
			if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
				t.Fatal(err)
			}
			if n := f.store.provisionCount(); n != 0 {
				t.Fatalf("Provision called %d times", n)
			}
			if len(f.pendingEvents()) != 0 {
				t.Fatalf("unexpected events %+v", f.pendingEvents())
			}
		})
	}
}

func TestBetaProvisionerAnnotationAndExtraNames(t *testing.T) {
	pvc := claim("c", "gold", func(c *corev1.PersistentVolumeClaim) {
		delete(c.Annotations, AnnStorageProvisioner)
		c.Annotations[AnnBetaStorageProvisioner] = "old.name/dir"
	})
	sc := class("gold", func(sc *storagev1.StorageClass) { sc.Provisioner = "old.name/dir" })
	f := newFixture(t, newStore(t), []Option{WithExtraProvisionerNames("old.name/dir")}, sc, pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil || f.pv("pvc-uid-c") == nil {
		t.Fatalf("claim of an extra name not provisioned: %v", err)
	}
}

func TestSelectedNodeIsPassedOn(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	pvc := claim("c", "late", func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnSelectedNode] = "node-1" })
	f := newFixture(t, newStore(t), nil, class("late", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc }), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if got := f.store.provisions[0].SelectedNodeName; got != "node-1" {
		t.Fatalf("SelectedNodeName = %q", got)
	}
}

func TestUserErrorsGetWarningEventsAndNoRetry(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	for name, tc := range map[string]struct {
		claim   *corev1.PersistentVolumeClaim
		message string
	}{
		"selector": {claim("c", "gold", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}), "spec.selector"},
		"block": {claim("c", "gold", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block }), "volumeMode Block"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newStore(t), nil, class("gold"), tc.claim)
			if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
				t.Fatalf("permanent user error was retried: %v", err)
			}
			f.requireEvent(EventProvisioningFailed, tc.message)
			if f.store.provisionCount() != 0 || len(f.journalKeys()) != 0 {
				t.Fatal("provisioning started anyway")
			}
		})
	}
}

func TestBlockProvisionerServesBlockClaims(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	pvc := claim("c", "gold", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block })
	f := newFixture(t, blockDirStore{newStore(t)}, nil, class("gold"), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if pv := f.pv("pvc-uid-c"); pv == nil || pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != block {
		t.Fatalf("block PV = %+v", pv)
	}
}

func TestMissingClassIsRetriedWithEvent(t *testing.T) {
	f := newFixture(t, newStore(t), nil, claim("c", "nope"))
	if err := f.c.syncClaim(f.ctx, "ns/c"); err == nil {
		t.Fatal("missing class not retried")
	}
	f.requireEvent(EventProvisioningFailed, `StorageClass "nope" not found`)
}

func TestFailureThresholdStopsAndIsReArmedOnlyByAChange(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningFinished, errors.New("backend says no: quota exceeded")
	}
	pvc := claim("c", "gold")
	f := newFixture(t, store, []Option{WithFailedProvisionThreshold(3)}, class("gold"), pvc)
	for i := 1; i <= 3; i++ {
		err := f.c.syncClaim(f.ctx, "ns/c")
		if i < 3 && err == nil {
			t.Fatalf("attempt %d: failure not retried", i)
		}
		if i == 3 && err != nil {
			t.Fatalf("attempt 3 reached the threshold but asks for a retry: %v", err)
		}
	}
	f.requireEvent(EventProvisioningFailed, "backend says no: quota exceeded")
	f.requireEvent(EventProvisioningFailed, "giving up after 3 attempts")
	// A resync (same resourceVersion) does not re-arm.
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if n := store.provisionCount(); n != 3 {
		t.Fatalf("resync re-armed the threshold: %d calls", n)
	}
	// A real change does.
	changed := pvc.DeepCopy()
	changed.ResourceVersion = "2"
	_ = f.c.claimInformer.GetIndexer().Update(changed)
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if n := store.provisionCount(); n != 4 {
		t.Fatalf("a changed claim was not retried: %d calls", n)
	}
	if len(store.assets(t)) != 0 || f.c.journal.Has("pvc-uid-c") {
		t.Fatal("a finished failure left state behind")
	}
}

func TestInBackgroundIsFinishedAndDeletedAfterClaimDeletion(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(n int, _ ProvisionOptions) (ProvisioningState, error) {
		if n == 1 {
			return ProvisioningInBackground, errors.New("timed out waiting for the backend")
		}
		return "", nil
	}
	pvc := claim("c", "gold")
	f := newFixture(t, store, []Option{WithFailedProvisionThreshold(1)}, class("gold"), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err == nil {
		t.Fatal("in-background operation not retried (even past the threshold)")
	}
	if !f.c.journal.Has("pvc-uid-c") {
		t.Fatal("in-background operation not kept in the journal")
	}
	// The claim goes before the operation finishes.
	_ = f.c.claimInformer.GetIndexer().Delete(pvc)
	_ = f.client.CoreV1().PersistentVolumeClaims("ns").Delete(f.ctx, "c", metav1.DeleteOptions{})
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if store.provisionCount() != 2 || !slices.Equal(store.deletes, []string{"pvc-uid-c"}) {
		t.Fatalf("provisions %d, deletes %v: the background result was not deleted", store.provisionCount(), store.deletes)
	}
	if len(store.assets(t)) != 0 || f.pv("pvc-uid-c") != nil || f.c.journal.Has("pvc-uid-c") {
		t.Fatal("leaked asset, PV or journal entry")
	}
}

func TestClaimDeletedDuringProvisionDeletesAsset(t *testing.T) {
	store := newStore(t)
	pvc := claim("c", "gold")
	var f *fixture
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		// The user deletes the claim while the backend works.
		_ = f.c.claimInformer.GetIndexer().Delete(pvc)
		_ = f.client.CoreV1().PersistentVolumeClaims("ns").Delete(context.Background(), "c", metav1.DeleteOptions{})
		return "", nil
	}
	f = newFixture(t, store, nil, class("gold"), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if f.pv("pvc-uid-c") != nil || len(store.assets(t)) != 0 || !slices.Equal(store.deletes, []string{"pvc-uid-c"}) {
		t.Fatalf("claim deleted during provisioning leaked: PV %v, assets %v", f.pv("pvc-uid-c") != nil, store.assets(t))
	}
}

func TestSaveFailureRetriesInBackgroundWithoutBlocking(t *testing.T) {
	pvc := claim("c", "gold")
	f := newFixture(t, newStore(t), nil, class("gold"), pvc)
	var mu sync.Mutex
	outage := true
	f.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if outage {
			return true, nil, apierrors.NewServiceUnavailable("apiserver is down")
		}
		return false, nil, nil
	})
	start := time.Now()
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("worker blocked on a failing PV save")
	}
	if f.c.saves.get("pvc-uid-c") == nil || !f.c.journal.Has("pvc-uid-c") {
		t.Fatal("unsaved PV not kept for a background retry")
	}
	// While saving, the claim is not provisioned twice.
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if f.store.provisionCount() != 1 {
		t.Fatal("claim provisioned again while its PV waits to be saved")
	}
	if err := f.c.syncSave(f.ctx, "pvc-uid-c"); err == nil {
		t.Fatal("save during the outage reported success")
	}
	mu.Lock()
	outage = false
	mu.Unlock()
	if err := f.c.syncSave(f.ctx, "pvc-uid-c"); err != nil {
		t.Fatal(err)
	}
	if f.pv("pvc-uid-c") == nil || f.c.saves.get("pvc-uid-c") != nil || f.c.journal.Has("pvc-uid-c") {
		t.Fatal("PV not saved after the outage")
	}
}

func TestRescheduleDropsSelectedNode(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	store := newStore(t)
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningReschedule, errors.New("node-1 has no space")
	}
	pvc := claim("c", "late", func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnSelectedNode] = "node-1" })
	f := newFixture(t, store, nil, class("late", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc }), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	live, _ := f.client.CoreV1().PersistentVolumeClaims("ns").Get(f.ctx, "c", metav1.GetOptions{})
	if _, ok := live.Annotations[AnnSelectedNode]; ok {
		t.Fatal("selected-node annotation not removed")
	}
	f.requireEvent(EventProvisioningFailed, "node-1 has no space")
}

func TestIgnoredProvisionIsQuiet(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningFinished, Ignore("not my node")
	}
	f := newFixture(t, store, nil, class("gold"), claim("c", "gold"))
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil || len(f.pendingEvents()) > 1 {
		t.Fatalf("err %v, events %+v", err, f.pendingEvents())
	}
}

func releasedPV(name string, policy corev1.PersistentVolumeReclaimPolicy, mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("pvuid-" + name), ResourceVersion: "5",
			Annotations: map[string]string{AnnProvisionedBy: testProvisioner}},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy, StorageClassName: "gold",
			ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "gone", UID: "uid-gone"}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

func TestDeleteReleasedVolume(t *testing.T) {
	pv := releasedPV("pv-1", corev1.PersistentVolumeReclaimDelete)
	store := newStore(t)
	_ = os.Mkdir(filepath.Join(store.root, "pv-1"), 0o755)
	f := newFixture(t, store, nil, pv)
	if err := f.c.syncVolume(f.ctx, "pv-1"); err != nil {
		t.Fatal(err)
	}
	if f.pv("pv-1") != nil || len(store.assets(t)) != 0 {
		t.Fatal("asset or PV left behind")
	}
	if n := f.writes("delete", "persistentvolumes") + f.writes("update", "persistentvolumes"); n != 1 {
		t.Fatalf("%d PV writes for a delete without finalizer, want 1", n)
	}
	// The informer has not caught up yet: no second, failing delete.
	if err := f.c.syncVolume(f.ctx, "pv-1"); err != nil || len(store.deletes) != 1 {
		t.Fatalf("volume deleted twice: %v, %v", store.deletes, err)
	}
	if got := testutil.ToFloat64(f.c.metrics.deleteTotal.WithLabelValues("gold")); got != 1 {
		t.Fatalf("delete_total = %v", got)
	}
}

func TestVolumesNotToDelete(t *testing.T) {
	for name, pv := range map[string]*corev1.PersistentVolume{
		"retain": releasedPV("pv-1", corev1.PersistentVolumeReclaimRetain),
		"bound": releasedPV("pv-1", corev1.PersistentVolumeReclaimDelete, func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeBound
		}),
		"not ours": releasedPV("pv-1", corev1.PersistentVolumeReclaimDelete, func(pv *corev1.PersistentVolume) {
			pv.Annotations[AnnProvisionedBy] = "x/y"
		}),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newStore(t), nil, pv)
			if err := f.c.syncVolume(f.ctx, "pv-1"); err != nil {
				t.Fatal(err)
			}
			if len(f.store.deletes) != 0 || f.pv("pv-1") == nil {
				t.Fatal("volume deleted")
			}
		})
	}
}

func TestDeleteFailureAndIgnored(t *testing.T) {
	store := newStore(t)
	store.deleteF = func(*corev1.PersistentVolume) error { return errors.New("backend unreachable") }
	f := newFixture(t, store, nil, releasedPV("pv-1", corev1.PersistentVolumeReclaimDelete))
	if err := f.c.syncVolume(f.ctx, "pv-1"); err == nil {
		t.Fatal("failed delete not retried")
	}
	f.requireEvent(EventVolumeFailedDelete, "backend unreachable")
	if f.pv("pv-1") == nil {
		t.Fatal("PV deleted although its asset was not")
	}
	store.deleteF = func(*corev1.PersistentVolume) error { return Ignore("owned by node-2") }
	if err := f.c.syncVolume(f.ctx, "pv-1"); err != nil || f.pv("pv-1") == nil {
		t.Fatalf("ignored delete: err %v, PV kept %v", err, f.pv("pv-1") != nil)
	}
}

func TestFinalizerLetsGoAfterTheAsset(t *testing.T) {
	now := metav1.Now()
	deletedReleased := releasedPV("pv-1", corev1.PersistentVolumeReclaimDelete, func(pv *corev1.PersistentVolume) {
		pv.Finalizers = []string{VolumeFinalizer}
		pv.DeletionTimestamp = &now
	})
	f := newFixture(t, newStore(t), []Option{WithFinalizer(true)}, deletedReleased)
	if err := f.c.syncVolume(f.ctx, "pv-1"); err != nil {
		t.Fatal(err)
	}
	if len(f.store.deletes) != 1 {
		t.Fatal("asset not deleted")
	}
	if pv := f.pv("pv-1"); pv != nil && slices.Contains(pv.Finalizers, VolumeFinalizer) {
		t.Fatal("finalizer kept: PV stuck Terminating")
	}
	if n := f.writes("delete", "persistentvolumes") + f.writes("update", "persistentvolumes"); n > 2 {
		t.Fatalf("%d PV writes, want at most 2", n)
	}

	retained := releasedPV("pv-2", corev1.PersistentVolumeReclaimRetain, func(pv *corev1.PersistentVolume) {
		pv.Finalizers = []string{VolumeFinalizer}
		pv.DeletionTimestamp = &now
	})
	f = newFixture(t, newStore(t), []Option{WithFinalizer(true)}, retained)
	if err := f.c.syncVolume(f.ctx, "pv-2"); err != nil {
		t.Fatal(err)
	}
	if len(f.store.deletes) != 0 {
		t.Fatal("retained asset deleted")
	}
	if pv := f.pv("pv-2"); pv == nil || slices.Contains(pv.Finalizers, VolumeFinalizer) {
		t.Fatal("finalizer of a retained PV not removed")
	}
}

func TestRecoveryFinishesOperationsOfDeletedClaims(t *testing.T) {
	// A controller died after Provision created the asset and before the PV
	// was saved; the claim was deleted while it was down.
	gone := claim("gone", "gold")
	store := newStore(t)
	first := newFixture(t, store, nil, class("gold"), gone)
	first.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("killed before the save")
	})
	if err := first.c.syncClaim(first.ctx, "ns/gone"); err != nil {
		t.Fatal(err)
	}
	if len(store.assets(t)) != 1 {
		t.Fatal("setup: no asset")
	}
	// A new controller starts with the journal and without the claim.
	second := first.restarted(store, nil, class("gold"))
	if second.c.claimQueue.Len() != 1 {
		t.Fatal("journal entry not queued")
	}
	if err := second.c.syncClaim(second.ctx, "ns/gone"); err != nil {
		t.Fatal(err)
	}
	if len(store.assets(t)) != 0 || second.c.journal.Has("pvc-uid-gone") {
		t.Fatalf("asset of a deleted claim leaked after restart: %v", store.assets(t))
	}
}

func TestRecoveryForgetsSavedVolumes(t *testing.T) {
	pvc := claim("c", "gold")
	f := newFixture(t, newStore(t), nil, class("gold"), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	// The controller died before the removal reached the journal.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: JournalName(testProvisioner, ""), Namespace: OutOfClusterNamespace},
		Data: map[string]string{"pvc-uid-c": `{"claim":{"metadata":{"name":"c","namespace":"ns","uid":"uid-c"}},"class":{"metadata":{"name":"gold"}}}`}}
	second := newFixture(t, newStore(t), nil, class("gold"), pvc, f.pv("pvc-uid-c"), cm)
	if err := second.c.resumeOperations(second.ctx); err != nil {
		t.Fatal(err)
	}
	if second.c.claimQueue.Len() != 0 || second.c.journal.Has("pvc-uid-c") {
		t.Fatal("saved volume treated as in flight")
	}
	if n := second.callsBut("secrets"); n != 1 {
		t.Fatalf("restart made %d API calls, want only the journal read (and its key's)", n)
	}
}

func TestJournalBatchesConcurrentRecords(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	var wg sync.WaitGroup
	const n = 50
	for i := range n {
		wg.Go(func() {
			pvc := claim(fmt.Sprintf("c%d", i), "gold")
			if err := f.c.journal.Record(f.ctx, "pv-"+pvc.Name, journal.Entry{Claim: pvc, Class: class("gold")}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	writes := f.writes("create", "configmaps") + f.writes("update", "configmaps")
	if writes >= n/2 {
		t.Fatalf("%d journal writes for %d concurrent records: not batched", writes, n)
	}
	if len(f.journalKeys()) != n {
		t.Fatalf("journal has %d entries, want %d", len(f.journalKeys()), n)
	}
	t.Logf("%d records, %d writes", n, writes)
}

func TestTwoControllersShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"a.io/x", "b.io/y"} {
		if _, err := NewProvisionController(fake.NewClientset(), name, newStore(t), WithMetricsRegisterer(reg)); err != nil {
			t.Fatalf("second controller on one registry: %v", err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// A stop (SIGTERM) while the controller is still starting is no failure:
// the binary must exit 0, not report the interrupted journal read.
func TestRunStoppedWhileStartingReturnsNil(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel() // the stop arrives while the journal is being read
		return true, nil, errors.New("connection reset by peer")
	})
	c, err := NewProvisionController(client, testProvisioner, newStore(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after a stop during start-up", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
}

func TestRunDrainsAndReturnsOnCancel(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(class("gold"), claim("c", "gold"))
	store := newStore(t)
	c, err := NewProvisionController(client, testProvisioner, store, WithEventFlushInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	for {
		if _, err := client.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-c", metav1.GetOptions{}); err == nil {
			break
		}
		select {
		case <-deadline:
			t.Fatal("claim not provisioned by Run")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !c.Ready() {
		t.Fatal("not ready after provisioning")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestPermanentFailureIsReportedOnceAndNotRetried(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningFinished, Permanent(errors.New("driver says: encryption is not supported"))
	}
	pvc := claim("c", "gold")
	f := newFixture(t, store, nil, class("gold"), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatalf("permanent failure asks for a retry: %v", err)
	}
	f.requireEvent(EventProvisioningFailed, "encryption is not supported; not retrying")
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if store.provisionCount() != 1 {
		t.Fatalf("permanent failure retried: %d calls", store.provisionCount())
	}
	changed := pvc.DeepCopy()
	changed.ResourceVersion = "2"
	_ = f.c.claimInformer.GetIndexer().Update(changed)
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if store.provisionCount() != 2 {
		t.Fatal("a changed claim was not retried")
	}
}

func TestInvalidPVDeletesAssetAndReports(t *testing.T) {
	f := newFixture(t, newStore(t), nil, class("gold"), claim("c", "gold"))
	f.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("PersistentVolume").GroupKind(), "pvc-uid-c", nil)
	})
	if err := f.c.syncClaim(f.ctx, "ns/c"); err == nil {
		t.Fatal("invalid PV not counted as a failed attempt")
	}
	f.requireEvent(EventProvisioningFailed, "the asset was deleted")
	if len(f.store.assets(t)) != 0 || f.c.saves.get("pvc-uid-c") != nil || f.c.journal.Has("pvc-uid-c") {
		t.Fatal("invalid PV left an asset, a pending save or a journal entry")
	}
}

func TestPVReadFromTheAPIIsSavedClean(t *testing.T) {
	store := newStore(t)
	f := newFixture(t, store, nil, class("gold"), claim("c", "gold"))
	store.provisionF = func(int, ProvisionOptions) (ProvisioningState, error) { return "", nil }
	wrapped := &stampingProvisioner{store}
	f.c.provisioner = wrapped
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if pv := f.pv("pvc-uid-c"); pv == nil || pv.ResourceVersion == "12345" {
		t.Fatalf("PV with server-set fields not saved cleanly: %+v", pv)
	}
}

// stampingProvisioner returns PVs as if read back from the API server.
type stampingProvisioner struct{ *dirStore }

func (s *stampingProvisioner) Provision(ctx context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	pv, state, err := s.dirStore.Provision(ctx, o)
	if pv != nil {
		pv.ResourceVersion, pv.UID, pv.CreationTimestamp = "12345", "server-uid", metav1.Now()
	}
	return pv, state, err
}

func TestGracefulStopWritesPendingRemovals(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(class("gold"), claim("c", "gold"))
	c, err := NewProvisionController(client, testProvisioner, newStore(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-c", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("claim not provisioned: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
	cm, err := client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(context.Background(), JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range cm.Data {
		if !journal.IsClassKey(k) {
			t.Fatalf("journal after a graceful stop: %v", cm.Data)
		}
	}
}

func TestClassNotYetCachedIsReadFromTheAPI(t *testing.T) {
	f := newFixture(t, newStore(t), nil, claim("c", "gold"))
	if _, err := f.client.StorageV1().StorageClasses().Create(f.ctx, class("gold"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if f.pv("pvc-uid-c") == nil || len(f.pendingEvents()) > 2 {
		t.Fatalf("class missing from the cache gave a false warning: %+v", f.pendingEvents())
	}
}

func TestActiveTaskRunsWhileActiveAndRunWaitsForIt(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started, finished := make(chan struct{}), make(chan struct{})
	task := func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(finished)
	}
	c, err := NewProvisionController(fake.NewClientset(), testProvisioner, newStore(t), WithoutLeaderElection(), WithActiveTask(task))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the active task did not start")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	select {
	case <-finished:
	default:
		t.Fatal("Run returned before the active task")
	}
	if _, err := NewProvisionController(fake.NewClientset(), testProvisioner, newStore(t), WithActiveTask(nil)); err == nil {
		t.Error("WithActiveTask(nil) accepted")
	}
}
