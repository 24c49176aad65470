// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// Tests of what the controller does with input that other people control:
// claims' metadata and data sources, journal entries, provisioner names,
// and a provisioner that panics or a replica that lacks permissions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// metadataStore reads one annotation in Provision and declares it.
type metadataStore struct{ *dirStore }

func (metadataStore) ClaimMetadataKeys(*storagev1.StorageClass) (labels, annotations []string) {
	return []string{"team"}, []string{"example.com/dir-name"}
}

func TestJournalKeepsOnlyDeclaredClaimMetadata(t *testing.T) {
	pvc := claim("c", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.Labels = map[string]string{"team": "a", "other": "x"}
		c.Annotations["example.com/dir-name"] = "data"
		c.Annotations["bulky"] = strings.Repeat("x", 10000)
	})
	store := metadataStore{newStore(t)}
	f := newFixture(t, store, nil, class("gold"), pvc)
	f.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("killed before the save")
	})
	_ = f.c.syncClaim(f.ctx, "ns/c")
	cm, err := f.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(f.ctx, JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var e journal.Entry
	if err := json.Unmarshal([]byte(cm.Data["pvc-uid-c"]), &e); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"team": "a"}; fmt.Sprint(e.Claim.Labels) != fmt.Sprint(want) {
		t.Errorf("journal kept labels %v, want %v", e.Claim.Labels, want)
	}
	if want := map[string]string{"example.com/dir-name": "data", AnnStorageProvisioner: testProvisioner}; fmt.Sprint(e.Claim.Annotations) != fmt.Sprint(want) {
		t.Errorf("journal kept annotations %v, want only the declared one and the system's", e.Claim.Annotations)
	}
	if e.Claim.UID != pvc.UID || e.Claim.Spec.StorageClassName == nil {
		t.Errorf("journal lost the claim's identity or spec: %+v", e.Claim)
	}
}

func TestOneNamespaceCannotFillTheJournal(t *testing.T) {
	// Claims of one tenant whose operations never end (a provisioner that
	// always answers "in background"), each with the most metadata the
	// provisioner reads, must leave room for another tenant's claim.
	big := strings.Repeat("d", 12*1024)
	objects := []runtime.Object{class("gold")}
	for i := range 40 {
		objects = append(objects, claim(fmt.Sprintf("flood-%d", i), "gold", func(c *corev1.PersistentVolumeClaim) {
			c.Namespace = "noisy"
			c.Annotations["example.com/dir-name"] = big
		}))
	}
	objects = append(objects, claim("quiet", "gold", func(c *corev1.PersistentVolumeClaim) { c.Namespace = "calm" }))
	store := metadataStore{newStore(t)}
	store.provisionF = func(_ int, o ProvisionOptions) (ProvisioningState, error) {
		if o.PVC.Namespace == "noisy" {
			return ProvisioningInBackground, errors.New("still creating")
		}
		return "", nil
	}
	f := newFixture(t, store, nil, objects...)
	// Bounds of one ConfigMap, so that the flood spills into a second one.
	f.c.journal.SetBounds(200*1024, 300*1024)
	refused := 0
	for i := range 40 {
		if err := f.c.syncClaim(f.ctx, fmt.Sprintf("noisy/flood-%d", i)); errors.Is(err, journal.ErrNamespaceFull) {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("one namespace recorded 40 operations of 12 KiB each: no per-namespace bound")
	}
	f.requireEvent(EventProvisioningFailed, "Namespace noisy has too many claims being provisioned at once")
	if err := f.c.syncClaim(f.ctx, "calm/quiet"); err != nil {
		t.Fatalf("claim of another namespace was not provisioned: %v", err)
	}
	if f.pv("pvc-uid-quiet") == nil {
		t.Fatal("no PV for the other namespace's claim")
	}
}

func TestOversizedClaimMetadataIsRefusedOnce(t *testing.T) {
	pvc := claim("c", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.Annotations["example.com/dir-name"] = strings.Repeat("d", journal.EntryMaxBytes)
	})
	store := metadataStore{newStore(t)}
	f := newFixture(t, store, nil, class("gold"), pvc)
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatalf("a claim that can never be recorded was queued for retries: %v", err)
	}
	f.requireEvent(EventProvisioningFailed, "labels and annotations the provisioner reads take more than")
	if store.provisionCount() != 0 {
		t.Fatal("Provision called for a claim that was not recorded")
	}
}

// Anyone who can write ConfigMaps in the provisioner's namespace can add
// journal keys of the right shape, naming a real claim's UID. Only entries
// signed with the provisioner's key are acted on; the others are left in
// place, logged, and reported on the claim they name.
func TestForeignJournalEntriesAreNeverActedOn(t *testing.T) {
	goldData, _ := json.Marshal(journal.StrippedClass(class("gold")))
	gold := journal.ClassKey(goldData)
	entry := func(claimName, uid, provisioner string) string {
		b, _ := json.Marshal(journal.Entry{
			Claim: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName, Namespace: "ns", UID: "x"}},
			Class: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Provisioner: provisioner},
		})
		return strings.Replace(string(b), `"uid":"x"`, `"uid":"`+uid+`"`, 1)
	}
	signed := func(claimName string) string {
		return signedTestEntry("pvc-uid-"+claimName, journal.Entry{Claim: journal.StrippedClaim(claim(claimName, "gold"), nil, nil, systemClaimAnnotations), ClassKey: gold}, string(goldData))
	}
	// The right shape, a signature made with another key.
	forged := strings.Replace(signed("f"), `"mac":"`, `"mac":"0`, 1)
	forged = forged[:len(forged)-3] + `"}`
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: JournalName(testProvisioner, ""), Namespace: OutOfClusterNamespace},
		Data: map[string]string{
			gold:            string(goldData),
			"../../etc":     entry("a", "uid-a", testProvisioner),            // not our naming
			"retained-dir":  entry("b", "uid-b", testProvisioner),            // not our naming either
			"pvc-uid-c":     entry("c", "uid-c", "other.example.com/driver"), // a class of another provisioner
			"pvc-uid-d":     entry("d", "uid-d", testProvisioner),            // our shape, a retained volume's claim
			"pvc-not-the-d": entry("d", "uid-d", testProvisioner),            // key does not match the claim
			"pvc-uid-f":     forged,
			"pvc-uid-e":     signed("e"), // ours
		},
	}
	store := newStore(t)
	// The retained volumes whose PVs are gone.
	for _, dir := range []string{"pvc-uid-d", "pvc-uid-f"} {
		if err := os.Mkdir(filepath.Join(store.root, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, store, nil, class("gold"), cm, journalKeySecret())
	if err := f.c.resumeOperations(f.ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e", "ns/f"} {
		if err := f.c.syncClaim(f.ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	store.mu.Lock()
	for _, o := range store.provisions {
		if o.PVName != "pvc-uid-e" {
			t.Errorf("Provision called for planted journal key %q", o.PVName)
		}
	}
	for _, name := range store.deletes {
		if name != "pvc-uid-e" {
			t.Errorf("Delete called for planted journal key %q", name)
		}
	}
	if len(store.provisions) != 1 {
		t.Errorf("the controller's own entry was not finished: %d Provision calls", len(store.provisions))
	}
	store.mu.Unlock()
	if assets := store.assets(t); !slices.Equal(assets, []string{"pvc-uid-d", "pvc-uid-f"}) {
		t.Errorf("assets %v, want the retained volumes untouched", assets)
	}
	f.requireEvent(EventProvisioningCleanupSkipped, `"pvc-uid-d" in ConfigMap default/`)
	f.requireEvent(EventProvisioningCleanupSkipped, `"pvc-uid-f" in ConfigMap default/`+JournalName(testProvisioner, "")+` names this claim but is not used: its signature does not verify`)
	// Left in place for an admin; the controller's own entry is done.
	f.c.journal.Flush(f.ctx)
	want := []string{"../../etc", "pvc-not-the-d", "pvc-uid-c", "pvc-uid-d", "pvc-uid-f", "retained-dir"}
	if keys := f.journalKeys(); !slices.Equal(keys, want) {
		t.Errorf("journal holds %v, want %v", keys, want)
	}
}

func TestProvisionerNamesMapToDistinctObjects(t *testing.T) {
	names := []string{"kubeprov.io/nfs", "kubeprov.io-nfs", "Kubeprov.io/NFS", "kubeprov.io_nfs", "kubeprov.io/nfs/", "kubeprov.io//nfs"}
	seen := map[string]string{}
	for _, n := range names {
		for _, obj := range []string{LeaseName(n), JournalName(n, ""), JournalName(n, "node-1")} {
			if errs := validation.IsDNS1123Subdomain(obj); len(errs) != 0 {
				t.Errorf("%q -> %q: not a valid object name: %v", n, obj, errs)
			}
			if other, ok := seen[obj]; ok && other != n {
				t.Errorf("%q and %q share %q", n, other, obj)
			}
			seen[obj] = n
		}
	}
	if LeaseName("example.com-dir") != "example.com-dir" {
		t.Errorf("a valid name was changed: %q", LeaseName("example.com-dir"))
	}
	// A valid name that looks like another's cleaned name is not kept as is.
	if posing := LeaseName("kubeprov.io/nfs"); LeaseName(posing) == posing {
		t.Errorf("provisioner %q takes the Lease of kubeprov.io/nfs", posing)
	}
	// An instance name must not be able to pose as part of the provisioner name.
	if JournalName("a", "b-c") == JournalName("a-b", "c") {
		t.Error(`provisioner "a" on "b-c" shares a journal with "a-b" on "c"`)
	}
}

func FuzzProvisionerNamesMapToDistinctObjects(f *testing.F) {
	f.Add("kubeprov.io/nfs", "kubeprov.io-nfs")
	f.Add("Kubeprov.io/NFS", "kubeprov.io/nfs")
	f.Add(strings.Repeat("a", 300), strings.Repeat("a", 301))
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == "" || b == "" || a == b {
			return
		}
		if LeaseName(a) == LeaseName(b) || JournalName(a, "") == JournalName(b, "") {
			t.Fatalf("%q and %q share a Lease or journal", a, b)
		}
		for _, obj := range []string{LeaseName(a), JournalName(a, ""), JournalName(a, b)} {
			if errs := validation.IsDNS1123Subdomain(obj); len(errs) != 0 {
				t.Fatalf("%q: %v", obj, errs)
			}
		}
	})
}

// panicking panics in Provision or Delete as long as panics is true.
type panicking struct {
	*dirStore
	panics bool
}

func (p *panicking) Provision(ctx context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	if p.panics {
		panic("provision bug")
	}
	return p.dirStore.Provision(ctx, o)
}

func (p *panicking) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if p.panics {
		var m map[string]int
		m["delete bug"]++ //nolint:staticcheck // SA5000: a nil map write on purpose, as real bugs panic
	}
	return p.dirStore.Delete(ctx, pv)
}

func TestPanicsInTheProvisionerAreRecovered(t *testing.T) {
	p := &panicking{dirStore: newStore(t), panics: true}
	f := newFixture(t, p, nil, class("gold"), claim("c", "gold"), releasedPV("pv-old", corev1.PersistentVolumeReclaimDelete))

	if err := f.c.syncClaim(f.ctx, "ns/c"); err == nil {
		t.Fatal("a panicking Provision was not retried")
	}
	// The value it panicked with ("provision bug") could be anything,
	// secrets included: only the log gets it.
	f.requireEvent(EventProvisioningFailed, "the provisioner panicked; its log has the details")
	for _, e := range f.pendingEvents() {
		if strings.Contains(e.Message, "provision bug") {
			t.Errorf("event quotes the panic value: %q", e.Message)
		}
	}
	// It may have created the asset before panicking: the operation stays
	// recorded until Provision says what became of it.
	if !f.c.journal.Has("pvc-uid-c") {
		t.Fatal("operation forgotten after a panic")
	}
	if err := f.c.syncVolume(f.ctx, "pv-old"); err == nil {
		t.Fatal("a panicking Delete was not retried")
	}
	// A runtime error says what it was.
	f.requireEvent(EventVolumeFailedDelete, "the provisioner panicked: assignment to entry in nil map")
	if got := testutil.ToFloat64(f.c.metrics.panics.WithLabelValues("provision")) + testutil.ToFloat64(f.c.metrics.panics.WithLabelValues("delete")); got != 2 {
		t.Errorf("panics counted = %v, want 2", got)
	}

	p.panics = false
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil || f.pv("pvc-uid-c") == nil {
		t.Fatalf("claim not provisioned once the provisioner stopped panicking: %v", err)
	}
	if err := f.c.syncVolume(f.ctx, "pv-old"); err != nil || f.pv("pv-old") != nil {
		t.Fatalf("volume not deleted once the provisioner stopped panicking: %v", err)
	}
}

func TestWorkerSurvivesAPanicInSync(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	q := f.c.claimQueue
	q.Add("boom")
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.work(f.ctx, "claims", q, func(context.Context, string) error {
			q.ShutDown() // one item is enough; the requeue after the panic is dropped
			panic("sync bug")
		}, nil)
	}()
	<-done
	if got := testutil.ToFloat64(f.c.metrics.panics.WithLabelValues("sync")); got != 1 {
		t.Fatalf("panics counted = %v, want 1", got)
	}
}

// populated supports data sources.
type populated struct{ *dirStore }

func (populated) SupportsDataSource(context.Context, *corev1.PersistentVolumeClaim) bool { return true }

func TestDataSourcesAreRefusedUnlessSupported(t *testing.T) {
	snapshot := func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap-1"}
	}
	clone := func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	}
	populator := func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("hello.example.com"), Kind: "Hello", Name: "h"}
	}
	store := newStore(t)
	f := newFixture(t, store, nil, class("gold"), claim("snap", "gold", snapshot), claim("clone", "gold", clone), claim("pop", "gold", populator))
	for _, key := range []string{"ns/snap", "ns/clone", "ns/pop"} {
		if err := f.c.syncClaim(f.ctx, key); err != nil {
			t.Fatalf("%s: retried a claim that cannot succeed: %v", key, err)
		}
	}
	if store.provisionCount() != 0 || len(store.assets(t)) != 0 {
		t.Fatal("an empty volume was provisioned for a claim that asked for data")
	}
	f.requireEvent(EventProvisioningFailed, `cannot fill a volume from a data source (VolumeSnapshot "snap-1")`)
	f.requireEvent(EventProvisioningFailed, `(PersistentVolumeClaim "src")`)
	f.requireEvent(EventProvisioning, `Waiting for a volume populator to fill the volume from Hello "h"`)

	supported := populated{newStore(t)}
	g := newFixture(t, supported, nil, class("gold"), claim("snap", "gold", snapshot))
	if err := g.c.syncClaim(g.ctx, "ns/snap"); err != nil || g.pv("pvc-uid-snap") == nil {
		t.Fatalf("a provisioner that supports data sources did not get the claim: %v", err)
	}
}

func TestSourceMetricLabelIsBounded(t *testing.T) {
	for i, tc := range []struct {
		mutate func(*corev1.PersistentVolumeClaim)
		want   string
	}{
		{func(*corev1.PersistentVolumeClaim) {}, ""},
		{func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "x"}
		}, "PersistentVolumeClaim"},
		{func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "x"}
		}, "VolumeSnapshot"},
		{func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("evil.example.com"), Kind: "AnyKind" + strings.Repeat("x", 100), Name: "x"}
		}, "other"},
		{func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("evil.example.com"), Kind: "VolumeSnapshot", Name: "x"}
		}, "other"},
	} {
		if got := sourceLabel(claim(fmt.Sprint(i), "gold", tc.mutate)); got != tc.want {
			t.Errorf("case %d: source label %q, want %q", i, got, tc.want)
		}
	}
}

func TestMissingJournalPermissionIsReportedOnTheClaimAndInReadiness(t *testing.T) {
	f := newFixture(t, newStore(t), nil, class("gold"), claim("c", "gold"))
	forbidden := true
	f.client.PrependReactor("*", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !forbidden {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("RBAC: access denied"))
	})
	close(f.c.synced)
	if !f.c.probeJournal(f.ctx) || f.c.Ready() {
		t.Fatal("ready although the journal cannot be read")
	}
	if err := f.c.NotReadyReason(); err == nil || !strings.Contains(err.Error(), "in-flight journal ConfigMap default/") {
		t.Fatalf("not-ready reason = %v", err)
	}
	if err := f.c.syncClaim(f.ctx, "ns/c"); err == nil {
		t.Fatal("claim blocked by a missing permission was not retried")
	}
	f.requireEvent(EventProvisioningFailed, "not allowed to use its in-flight journal ConfigMap")

	forbidden = false
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if !f.c.Ready() {
		t.Fatalf("still not ready once the permission was granted: %v", f.c.NotReadyReason())
	}
}

func TestMissingLeasePermissionMakesTheReplicaNotReady(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	close(f.c.synced)
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "x", errors.New("RBAC: access denied"))
	lock := observedLock{Interface: failingLock{err: denied}, observe: func(err error) { f.c.access.observe(f.ctx, "Lease x/y", err) }}
	_, _, _ = lock.Get(f.ctx)
	if f.c.Ready() {
		t.Fatal("ready although the Lease cannot be read")
	}
	lock.Interface = failingLock{err: apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "y")}
	_, _, _ = lock.Get(f.ctx)
	if !f.c.Ready() {
		t.Fatalf("a Lease that does not exist yet is no permission problem: %v", f.c.NotReadyReason())
	}
}

type failingLock struct {
	resourcelock.Interface
	err error
}

func (l failingLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return nil, nil, l.err
}

// An error without a state (a port from a library where that meant "no
// change") keeps an operation that an earlier attempt left in progress.
func TestEmptyStateWithAnErrorKeepsAnOperationInProgress(t *testing.T) {
	store := newStore(t)
	store.provisionF = func(n int, _ ProvisionOptions) (ProvisioningState, error) {
		if n == 1 {
			return ProvisioningInBackground, errors.New("timed out")
		}
		return "", errors.New("backend busy")
	}
	f := newFixture(t, store, nil, class("gold"), claim("c", "gold"))
	_ = f.c.syncClaim(f.ctx, "ns/c")
	_ = f.c.syncClaim(f.ctx, "ns/c")
	if !f.c.journal.Has("pvc-uid-c") {
		t.Fatal("an error with no state ended an operation that was in progress: its asset would be forgotten")
	}
}

func TestJournalNamePerInstance(t *testing.T) {
	// Readable (provisioner and node in the name), and distinct per node.
	if got := JournalName("kubeprov.io/hostpath", "worker-1.example.com"); !strings.HasPrefix(got, "kubeprov.io-hostpath-") ||
		!strings.Contains(got, "-worker-1.example.com-") || !strings.HasSuffix(got, "-inflight") {
		t.Errorf("JournalName = %q", got)
	}
	long := strings.Repeat("n", 253)
	a, b := JournalName("kubeprov.io/hostpath", long), JournalName("kubeprov.io/hostpath", long[1:])
	for _, name := range []string{a, b} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) != 0 {
			t.Errorf("%q is not a valid name: %v", name, errs)
		}
	}
	if a == b {
		t.Errorf("long node names share journal %q", a)
	}
}
