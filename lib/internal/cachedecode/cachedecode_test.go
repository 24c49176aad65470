// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cachedecode

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// encodeProtobuf encodes obj as kube-apiserver sends it: the protobuf
// envelope with its type.
func encodeProtobuf(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeAsClient decodes data as the informers' client does, with the
// settled decoder or (whole) with the scheme's.
func decodeAsClient(t *testing.T, data []byte, settled bool, into runtime.Object) runtime.Object {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if settled {
		info, _ = runtime.SerializerInfoForMediaType(settledDecoding{scheme.Codecs.WithoutConversion()}.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	}
	obj, _, err := scheme.Codecs.WithoutConversion().DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion).Decode(data, nil, into)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func settledTestVolume(mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	now := metav1.Now()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", UID: "pv-uid", ResourceVersion: "17", CreationTimestamp: now,
			Annotations: map[string]string{AnnProvisionedBy: testProvisioner, "pv.kubernetes.io/bound-by-controller": "yes"},
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "provisioner"},
			Finalizers:  []string{"kubernetes.io/pv-protection", "kubeprov.io/volume-cleanup"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "provisioner", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:claimRef":{}}}`), Time: &now}}},
		Spec: corev1.PersistentVolumeSpec{StorageClassName: "gold", PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "apps", Name: "data", UID: "claim-uid", ResourceVersion: "9"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pvc-1"}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

const testProvisioner = "test.kubeprov.io/dir"

func settledTestClaim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	className := "gold"
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "uid-data", ResourceVersion: "1", Finalizers: []string{"kubernetes.io/pvc-protection"},
			Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": testProvisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &className, VolumeName: "pvc-1",
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSource:  &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// withDuplicateMetadata appends a second metadata field to an encoded
// object: a whole decode merges the two, so the reader must leave it to one.
func withDuplicateMetadata(t *testing.T, data []byte, meta metav1.ObjectMeta) []byte {
	t.Helper()
	apiVersion, kind, raw, ok := protobufEnvelope(data)
	if !ok {
		t.Fatal("not an envelope")
	}
	encodedMeta, err := meta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw = protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), raw...), 1, protowire.BytesType), encodedMeta)
	unknown := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	envelope, err := unknown.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte(nil), protobufPrefix...), envelope...)
}

func TestUnsettledClaimEvents(t *testing.T) {
	bound := settledTestClaim(func(c *corev1.PersistentVolumeClaim) {
		c.Name, c.ResourceVersion = "bound", "42"
		// A tenant's annotation must not end the informer's initial events.
		c.Annotations[metav1.InitialEventsAnnotationKey] = "true"
	})
	deleting := bound.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	unbound := settledTestClaim(func(c *corev1.PersistentVolumeClaim) { c.Name, c.Spec.VolumeName = "unbound", "" })
	bookmark := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42"}}
	for _, tt := range []struct {
		name string
		in   watch.Event
		want watch.Event
	}{
		{"unbound claim added", watch.Event{Type: watch.Added, Object: unbound}, watch.Event{Type: watch.Added, Object: unbound}},
		{"unbound claim modified", watch.Event{Type: watch.Modified, Object: unbound}, watch.Event{Type: watch.Modified, Object: unbound}},
		{"bound claim added: a bookmark of its resource version", watch.Event{Type: watch.Added, Object: bound}, watch.Event{Type: watch.Bookmark, Object: bookmark}},
		{"claim bound: leaves the cache", watch.Event{Type: watch.Modified, Object: bound}, watch.Event{Type: watch.Deleted, Object: bound}},
		{"bound claim deleted", watch.Event{Type: watch.Deleted, Object: bound}, watch.Event{Type: watch.Deleted, Object: bound}},
		{"bound claim being deleted: back in the cache", watch.Event{Type: watch.Modified, Object: deleting}, watch.Event{Type: watch.Modified, Object: deleting}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := UnsettledClaimEvent(tt.in)
			if !ok {
				t.Fatal("event dropped")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("event passed on (-want +got):\n%s", diff)
			}
		})
	}
}

// What the PV cache holds is the same whether a PV was decoded whole or
// only its cached fields were read; only bound PVs not being deleted are
// read so.
func TestSettledDecoderVolumesAsWholeDecoding(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name  string
		pv    *corev1.PersistentVolume
		light bool
	}{
		{"bound", settledTestVolume(), true},
		{"bound, no claim reference, not ours", settledTestVolume(func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = nil
			pv.Annotations = map[string]string{"other": "x"}
		}), true},
		{"bound, provisioned-by empty", settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Annotations[AnnProvisionedBy] = "" }), true},
		{"bound, no spec", settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Spec = corev1.PersistentVolumeSpec{} }), true},
		{"bound, being deleted", settledTestVolume(func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &now }), false},
		{"released", settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased }), false},
		{"available", settledTestVolume(func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeAvailable
			pv.Spec.ClaimRef = nil
		}), false},
		{"no status", settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Status = corev1.PersistentVolumeStatus{} }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodeProtobuf(t, tt.pv)
			_, _, raw, _ := protobufEnvelope(data)
			if _, light := readBoundVolume(raw); light != tt.light {
				t.Errorf("read from its cached fields: %v, want %v", light, tt.light)
			}
			want, _ := Trim(decodeAsClient(t, data, false, nil), nil)
			got, _ := Trim(decodeAsClient(t, data, true, nil), nil)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cached PV (-whole decoding +settled decoder):\n%s", diff)
			}
		})
	}
	t.Run("metadata twice: decoded whole", func(t *testing.T) {
		data := withDuplicateMetadata(t, encodeProtobuf(t, settledTestVolume()), metav1.ObjectMeta{Name: "pvc-2"})
		_, _, raw, _ := protobufEnvelope(data)
		if _, light := readBoundVolume(raw); light {
			t.Error("read from its cached fields, want decoded whole")
		}
		got := decodeAsClient(t, data, true, nil).(*corev1.PersistentVolume)
		if got.Name != "pvc-2" || got.Spec.Capacity == nil {
			t.Errorf("got name %q, capacity %v; want the merged whole PV", got.Name, got.Spec.Capacity)
		}
	})
}

// A settled claim is read as its identity and volume name, and is whole
// again when needed; other claims are decoded whole.
func TestSettledDecoderClaims(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		settled bool
	}{
		{"bound", settledTestClaim(), true},
		{"bound, being deleted", settledTestClaim(func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &now }), false},
		{"unbound", settledTestClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = ""
			c.Status.Phase = corev1.ClaimPending
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodeProtobuf(t, tt.claim)
			whole := decodeAsClient(t, data, false, nil).(*corev1.PersistentVolumeClaim)
			got := decodeAsClient(t, data, true, nil)
			settled, ok := got.(*settledClaim)
			if ok != tt.settled {
				t.Fatalf("decoded as %T, want settled %v", got, tt.settled)
			}
			if !ok {
				if diff := cmp.Diff(whole, got); diff != "" {
					t.Errorf("claim (-whole decoding +settled decoder):\n%s", diff)
				}
				return
			}
			if settled.resourceVersion != "1" {
				t.Errorf("settled claim's resource version %q, want \"1\"", settled.resourceVersion)
			}
			again, err := settled.whole()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(whole, again); diff != "" {
				t.Errorf("whole again (-whole decoding +settled decoder):\n%s", diff)
			}
		})
	}
	t.Run("metadata twice: decoded whole", func(t *testing.T) {
		data := withDuplicateMetadata(t, encodeProtobuf(t, settledTestClaim()), metav1.ObjectMeta{Name: "other"})
		got, ok := decodeAsClient(t, data, true, nil).(*corev1.PersistentVolumeClaim)
		if !ok || got.Name != "other" || got.Spec.DataSource == nil {
			t.Errorf("got %#v, want the merged whole claim", got)
		}
	})
}

// The watch filter passes a settled claim's arrival as a bookmark, and its
// binding and deletion whole.
func TestSettledClaimEvents(t *testing.T) {
	settled := decodeAsClient(t, encodeProtobuf(t, settledTestClaim()), true, nil)
	for _, tt := range []struct {
		in, want watch.EventType
		whole    bool
	}{
		{watch.Added, watch.Bookmark, false},
		{watch.Modified, watch.Deleted, true},
		{watch.Deleted, watch.Deleted, true},
	} {
		e, keep := UnsettledClaimEvent(watch.Event{Type: tt.in, Object: settled})
		got, ok := e.Object.(*corev1.PersistentVolumeClaim)
		if !keep || e.Type != tt.want || !ok {
			t.Errorf("%s: got %s %T (kept %v), want %s of a claim", tt.in, e.Type, e.Object, keep, tt.want)
			continue
		}
		if whole := got.Spec.DataSource != nil; whole != tt.whole || got.ResourceVersion != "1" {
			t.Errorf("%s: passed on whole %v, resource version %q; want whole %v, \"1\"", tt.in, whole, got.ResourceVersion, tt.whole)
		}
	}
}

// Lists, read one item at a time, keep the unsettled claims, and of PVs
// what the cache keeps.
func TestListReaders(t *testing.T) {
	unbound := settledTestClaim(func(c *corev1.PersistentVolumeClaim) {
		c.Name, c.Spec.VolumeName = "unbound", ""
	})
	claims := &corev1.PersistentVolumeClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "42"},
		Items: []corev1.PersistentVolumeClaim{*settledTestClaim(), *unbound}}
	data := encodeProtobuf(t, claims)
	gotClaims := readListAs(t, readClaimList, data, &corev1.PersistentVolumeClaimList{})
	wantClaims := decodeAsClient(t, data, false, &corev1.PersistentVolumeClaimList{}).(*corev1.PersistentVolumeClaimList)
	wantClaims.Items = wantClaims.Items[1:]
	if diff := cmp.Diff(wantClaims, gotClaims); diff != "" {
		t.Errorf("claim list (-want +got):\n%s", diff)
	}

	released := settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Name, pv.Status.Phase = "pvc-2", corev1.VolumeReleased })
	volumes := &corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "43"},
		Items: []corev1.PersistentVolume{*settledTestVolume(), *released}}
	data = encodeProtobuf(t, volumes)
	gotVolumes := readListAs(t, readVolumeList, data, &corev1.PersistentVolumeList{})
	wantVolumes := decodeAsClient(t, data, false, &corev1.PersistentVolumeList{}).(*corev1.PersistentVolumeList)
	for _, l := range []*corev1.PersistentVolumeList{gotVolumes, wantVolumes} {
		for i := range l.Items {
			_, _ = Trim(&l.Items[i], nil)
		}
	}
	if diff := cmp.Diff(wantVolumes, gotVolumes); diff != "" {
		t.Errorf("PV list as cached (-whole decoding +settled decoder):\n%s", diff)
	}
	if gotVolumes.Items[1].Spec.Capacity == nil {
		t.Error("released PV not whole")
	}

	// A list cut short is an error, wherever it is cut in its encoding (the
	// envelope's typeMeta, then the list).
	typeMetaLen := protowire.ConsumeFieldValue(1, protowire.BytesType, data[len(protobufPrefix)+1:]) + 1
	listStart := len(protobufPrefix) + typeMetaLen
	listLen := protowire.ConsumeFieldValue(2, protowire.BytesType, data[listStart+1:]) + 1
	if typeMetaLen <= 1 || listLen <= 1 {
		t.Fatal("the test's PV list is not encoded as typeMeta, then the list")
	}
	for cut := listStart + 1; cut < listStart+listLen; cut++ {
		if _, err := readVolumeList(bytes.NewReader(data[:cut])); err == nil {
			t.Fatalf("a PV list cut at %d of %d bytes read without an error", cut, len(data))
		}
	}
	// Another kind in answer is refused.
	if _, err := readVolumeList(bytes.NewReader(encodeProtobuf(t, claims))); err == nil {
		t.Error("a claim list read as a PV list")
	}
	// A JSON list (a server without protobuf) is decoded whole, still
	// without its settled claims.
	json, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), claims)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := readClaimList(bytes.NewReader(json))
	if err != nil {
		t.Fatal(err)
	}
	if l := fromJSON.(*metainternalversion.List); len(l.Items) != 1 || l.Items[0].(*corev1.PersistentVolumeClaim).Name != "unbound" || l.ResourceVersion != "42" {
		t.Errorf("JSON claim list read as %+v, want the unbound claim at version 42", l)
	}
}

// A list bigger than any one object may be is read whole (kube-apiserver's
// list of 100,000 PVs is about 100 MB).
func TestListReaderBigList(t *testing.T) {
	volumes := &corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "44"}}
	for i := range 60000 {
		volumes.Items = append(volumes.Items, *settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Name = fmt.Sprintf("pvc-%d", i) }))
	}
	data := encodeProtobuf(t, volumes)
	if len(data) <= maxListItem {
		t.Fatalf("the test's list is %d bytes, not more than one item may be (%d)", len(data), maxListItem)
	}
	read, err := readVolumeList(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	l := read.(*metainternalversion.List)
	if len(l.Items) != len(volumes.Items) || l.ResourceVersion != "44" || l.Items[59999].(*corev1.PersistentVolume).Name != "pvc-59999" {
		t.Errorf("read %d PVs at version %q, want %d at 44", len(l.Items), l.ResourceVersion, len(volumes.Items))
	}
}

// readListAs reads data with read, one byte at a time, into a list of
// list's type.
func readListAs[L runtime.Object](t *testing.T, read func(io.Reader) (runtime.Object, error), data []byte, list L) L {
	t.Helper()
	got, err := asTyped(list, read, iotest.OneByteReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	return got.(L)
}

// The informers' client shares a real clientset's connection and speaks
// protobuf with the settled decoder: over HTTP, a settled claim in a watch
// arrives as a settledClaim and a list holds only the unsettled claims.
func TestSettledDecodingClientOverHTTP(t *testing.T) {
	unbound := settledTestClaim(func(c *corev1.PersistentVolumeClaim) { c.Name, c.Spec.VolumeName = "unbound", "" })
	var mu sync.Mutex
	var accepts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepts = append(accepts, r.Header.Get("Accept"))
		mu.Unlock()
		if r.URL.Path != "/api/v1/persistentvolumeclaims" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			_, _ = w.Write(encodeProtobuf(t, &corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{*settledTestClaim(), *unbound}}))
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		for _, e := range []watch.Event{{Type: watch.Added, Object: settledTestClaim()}, {Type: watch.Modified, Object: settledTestClaim()}, {Type: watch.Added, Object: unbound}} {
			event, err := (&metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: encodeProtobuf(t, e.Object)}}).Marshal()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(event))))
			_, _ = w.Write(event)
		}
	}))
	defer srv.Close()
	core := CoreV1(kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}))
	if core == nil {
		t.Fatal("no settled decoding client for a real clientset")
	}
	ctx := context.Background()
	listed, err := ListClaims(ctx, core, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := listed.(*metainternalversion.List)
	if len(list.Items) != 1 || list.Items[0].(*corev1.PersistentVolumeClaim).Name != "unbound" || list.Items[0].(*corev1.PersistentVolumeClaim).Spec.Resources.Requests == nil {
		t.Errorf("listed %+v, want the unbound claim only, whole", list.Items)
	}
	w, err := core.PersistentVolumeClaims("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	var events []watch.Event
	for e := range w.ResultChan() {
		got = append(got, fmt.Sprintf("%s %T", e.Type, e.Object))
		events = append(events, e)
	}
	if diff := cmp.Diff([]string{"ADDED *cachedecode.settledClaim", "MODIFIED *cachedecode.settledClaim", "ADDED *v1.PersistentVolumeClaim"}, got); diff != "" {
		t.Fatalf("watch events (-want +got):\n%s", diff)
	}
	// The settled claim's encoding is still its own after later events.
	if whole, err := events[1].Object.(*settledClaim).whole(); err != nil || whole.Name != "data" || whole.Spec.DataSource == nil {
		t.Errorf("settled claim whole after later events: %+v, %v", whole, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, accept := range accepts {
		if accept != runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON {
			t.Errorf("requested %q, want protobuf", accept)
		}
	}
	if core := CoreV1(fake.NewClientset()); core != nil {
		t.Error("settled decoding client for a fake clientset")
	}
}

// BenchmarkSettledDecoding compares decoding a bound claim and its PV, as
// the informers receive them, whole and with the settled decoder.
func BenchmarkSettledDecoding(b *testing.B) {
	t := &testing.T{}
	managed := func(obj metav1.Object) {
		now := metav1.Now()
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:pv.kubernetes.io/bind-completed":{},"f:pv.kubernetes.io/bound-by-controller":{}}},"f:spec":{"f:volumeName":{}}}`)},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:phase":{}}}`), Subresource: "status"},
		})
	}
	claim, pv := settledTestClaim(), settledTestVolume()
	managed(claim)
	managed(pv)
	objects := map[string][]byte{"claim": encodeProtobuf(t, claim), "PV": encodeProtobuf(t, pv)}
	for _, kind := range []string{"claim", "PV"} {
		for _, settled := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/settled=%v", kind, settled), func(b *testing.B) {
				info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
				decoder := info.Serializer
				if settled {
					decoder = settledDecoder{info.Serializer}
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := decoder.Decode(objects[kind], nil, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
