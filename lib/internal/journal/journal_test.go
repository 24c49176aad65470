// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2/ktesting"
)

// What the journal does through the controller (resuming, leaving
// entries to an admin, shards filling up) is tested in lib/controller; these
// tests hold the package's own contract: what Record writes, Load reads
// back, and nothing else passes for it.

const systemAnnotation = "volume.kubernetes.io/storage-provisioner"

// newTestJournal is a journal on client with its writer running until the
// test ends.
func newTestJournal(t *testing.T, client kubernetes.Interface) (*Journal, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	j := New(Config{Client: client, Namespace: "kube-system", Name: "journal", Writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "writes"}),
		Labels: map[string]string{"app.kubernetes.io/managed-by": "test"}, SystemAnnotations: []string{systemAnnotation}})
	done := make(chan struct{})
	go func() { j.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return j, ctx
}

func testEntry() Entry {
	className := "gold"
	return Entry{
		Claim: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", UID: "uid-data", ResourceVersion: "7",
				Labels:      map[string]string{"team": "a"},
				Annotations: map[string]string{systemAnnotation: "example.com/dir", "note": "not read"}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &className},
		},
		Class:        &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gold", UID: "uid-gold"}, Provisioner: "example.com/dir"},
		SelectedNode: "node-1",
	}
}

func TestRecordedEntryIsLoadedBack(t *testing.T) {
	client := fake.NewClientset()
	j, ctx := newTestJournal(t, client)
	if err := j.Record(ctx, "pvc-uid-data", testEntry()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(j.writes); n != 1 {
		t.Errorf("%v ConfigMap writes counted for one record, want 1", n)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "journal", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no journal ConfigMap after Record returned: %v", err)
	}
	if cm.Labels["app.kubernetes.io/managed-by"] != "test" {
		t.Errorf("ConfigMap labels %v, want the configured ones", cm.Labels)
	}

	// Another journal on the same ConfigMap and key: a restart.
	restarted, ctx := newTestJournal(t, client)
	entries, unverified, err := restarted.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(unverified) != 0 {
		t.Fatalf("own entry not verified: %+v", unverified)
	}
	want := testEntry()
	// Without declared metadata keys only the system annotations are kept,
	// and the entry says the claim had more.
	want.Claim = &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", UID: "uid-data",
			Annotations: map[string]string{systemAnnotation: "example.com/dir"}},
		Spec: want.Claim.Spec}
	want.ClaimIncomplete = true
	want.ClassKey = entries["pvc-uid-data"].ClassKey
	if diff := cmp.Diff(map[string]Entry{"pvc-uid-data": want}, entries); diff != "" {
		t.Fatalf("loaded entries (-want +got):\n%s", diff)
	}
	if !restarted.Has("pvc-uid-data") {
		t.Error("a loaded entry is not in flight")
	}
}

func TestChangedEntryIsNotVerifiedAndStaysAsItIs(t *testing.T) {
	client := fake.NewClientset()
	j, ctx := newTestJournal(t, client)
	if err := j.Record(ctx, "pvc-uid-data", testEntry()); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "journal", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Someone able to write the ConfigMap points the entry at another claim.
	tampered := strings.Replace(cm.Data["pvc-uid-data"], `"name":"data"`, `"name":"victim"`, 1)
	if tampered == cm.Data["pvc-uid-data"] {
		t.Fatalf("entry %s does not name its claim", tampered)
	}
	cm.Data["pvc-uid-data"] = tampered
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	restarted, ctx := newTestJournal(t, client)
	entries, unverified, err := restarted.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := unverified["pvc-uid-data"]
	if len(entries) != 0 || !ok || !strings.Contains(u.Reason, "signature does not verify") || u.Claim.Name != "victim" {
		t.Fatalf("entries %v, unverified %+v: want the changed entry unverified, saying why", entries, unverified)
	}
	// A write of the ConfigMap for another entry keeps it as it is.
	other := testEntry()
	other.Claim.Name, other.Claim.UID = "other", "uid-other"
	if err := restarted.Record(ctx, "pvc-uid-other", other); err != nil {
		t.Fatal(err)
	}
	cm, err = client.CoreV1().ConfigMaps("kube-system").Get(ctx, "journal", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["pvc-uid-data"] != tampered || cm.Data["pvc-uid-other"] == "" {
		t.Fatalf("after another record the ConfigMap holds %v", cm.Data)
	}
}

func TestSignedEntrySplitsBack(t *testing.T) {
	entry := `{"claim":{"metadata":{"name":"data"}}}`
	data := SignedEntry([]byte("0123456789abcdef0123456789abcdef"), "ns", "journal", "pvc-1", []byte(entry), "{}")
	got, signature, ok := splitSignedEntry(data)
	if !ok || got != entry || len(signature) != journalSignatureHex {
		t.Fatalf("split of %s: %q, %q, %v", data, got, signature, ok)
	}
	for _, unsigned := range []string{entry, `{}`, ""} {
		if _, _, ok := splitSignedEntry(unsigned); ok {
			t.Errorf("%q read as signed", unsigned)
		}
	}
}

func TestShardsRecorded(t *testing.T) {
	first := func(annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	}
	for _, tt := range []struct {
		name string
		cm   *corev1.ConfigMap
		want int
	}{
		{"no journal", nil, 0},
		{"a journal from before shards", first(nil), 1},
		{"says three", first(map[string]string{ShardsAnnotation: "3"}), 3},
		{"unreadable: read them all", first(map[string]string{ShardsAnnotation: "many"}), Shards},
		{"out of range: read them all", first(map[string]string{ShardsAnnotation: "99"}), Shards},
	} {
		if got := shardsRecorded(tt.cm); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestWritesNeverWaitForTheClientsBudget: with the client's rate limiter
// refusing every request (its budget spent on PV writes and events), the
// journal's writes still reach the server at once: a volume's ID must
// never wait behind the PV writes queued before it (issue 36 case 8).
func TestWritesNeverWaitForTheClientsBudget(t *testing.T) {
	var writes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/configmaps") && !strings.Contains(r.URL.Path, "/configmaps/") || r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		writes.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body) // the ConfigMap as written
	}))
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, RateLimiter: flowcontrol.NewFakeNeverRateLimiter()})
	if _, err := client.CoreV1().Secrets("kube-system").Get(context.Background(), KeySecret, metav1.GetOptions{}); err == nil {
		t.Fatal("the client's rate limiter let a request through; the test needs one that refuses all")
	}
	j, ctx := newTestJournal(t, client)
	j.key = []byte("0123456789abcdef0123456789abcdef") // loaded through the client, which refuses everything
	e := testEntry()
	if err := j.Record(ctx, "pvc-1", e); err != nil {
		t.Fatalf("Record with the client's budget spent: %v", err)
	}
	if err := j.RecordAsset("pvc-1", "vol-1"); err != nil {
		t.Fatal(err)
	}
	j.Flush(ctx)
	if n := writes.Load(); n != 2 {
		t.Fatalf("the server got %d journal writes, want 2 (the entry, then its ID)", n)
	}
}
