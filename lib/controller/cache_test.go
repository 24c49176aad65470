// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kubeprov/external-storage/lib/internal/cachedecode"
	"github.com/kubeprov/external-storage/lib/internal/journal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// The controller's own informers keep of settled objects only what the
// controller reads, and everything of the objects it works on.
func TestCacheTrimsOnlySettledObjects(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	now := metav1.Now()
	unbound := claim("unbound", "gold", func(c *corev1.PersistentVolumeClaim) { c.ManagedFields = managed })
	bound := claim("bound", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.ManagedFields = managed
		c.Spec.VolumeName = "pvc-uid-bound"
		c.Status.Phase = corev1.ClaimBound
	})
	deleting := bound.DeepCopy()
	deleting.DeletionTimestamp = &now
	boundPV := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-bound", UID: "pv-uid", ResourceVersion: "7", ManagedFields: managed,
			Annotations: map[string]string{AnnProvisionedBy: testProvisioner}, Finalizers: []string{VolumeFinalizer}},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:                      &corev1.ObjectReference{Namespace: "ns", Name: "bound", UID: bound.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "gold",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pvc-uid-bound"}},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	released := boundPV.DeepCopy()
	released.Status.Phase = corev1.VolumeReleased
	deletedPV := boundPV.DeepCopy()
	deletedPV.DeletionTimestamp = &now

	withoutManaged := func(obj metav1.Object) any {
		obj.SetManagedFields(nil)
		return obj
	}
	tests := []struct {
		name string
		in   metav1.Object
		want any
	}{
		{"unbound claim: all of it", unbound.DeepCopy(), withoutManaged(unbound.DeepCopy())},
		{"claim being deleted: all of it", deleting.DeepCopy(), withoutManaged(deleting.DeepCopy())},
		{"bound claim on its way out of the cache: all of it", bound.DeepCopy(), withoutManaged(bound.DeepCopy())},
		{"released PV: all of it, for Delete", released.DeepCopy(), withoutManaged(released.DeepCopy())},
		{"PV deleted before its claim: all of it, for Delete", deletedPV.DeepCopy(), withoutManaged(deletedPV.DeepCopy())},
		{"bound PV: what says when it becomes ours to delete", boundPV.DeepCopy(), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-bound", UID: "pv-uid", ResourceVersion: "7",
				Annotations: map[string]string{AnnProvisionedBy: testProvisioner}},
			Spec:   corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "bound", UID: bound.UID}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}},
		{"bound PV of another provisioner: no annotation", func() metav1.Object {
			pv := boundPV.DeepCopy()
			pv.Annotations = map[string]string{"other": "x"}
			pv.Spec.ClaimRef = nil
			return pv
		}(), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-bound", UID: "pv-uid", ResourceVersion: "7"},
			Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cachedecode.Trim(tt.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cached object (-want +got):\n%s", diff)
			}
		})
	}
}

// A provisioner that reads volumes itself keeps what it reads of bound PVs.
func TestCacheKeepsWhatTheProvisionerReads(t *testing.T) {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv"},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/share/a"}},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	got, err := cachedecode.Trim(pv.DeepCopy(), func(full, cached *corev1.PersistentVolume) { cached.Spec.NFS = full.Spec.NFS })
	if err != nil {
		t.Fatal(err)
	}
	cached := got.(*corev1.PersistentVolume)
	if diff := cmp.Diff(pv.Spec.NFS, cached.Spec.NFS); diff != "" {
		t.Errorf("kept NFS source (-want +got):\n%s", diff)
	}
	if cached.Spec.Capacity != nil {
		t.Errorf("capacity cached: %v", cached.Spec.Capacity)
	}
}

// The informers the controller creates itself, and those of
// NewInformerFactory, leave bound claims out and trim the rest; other
// injected ones, shared with other code, only lose managed fields.
func TestTrimmingOnlyInOwnInformers(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	bound := claim("bound", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = "pv"
		c.ManagedFields = managed
	})
	unbound := claim("unbound", "gold", func(c *corev1.PersistentVolumeClaim) { c.ManagedFields = managed })
	for _, tt := range []struct {
		name      string
		opts      func(kubernetes.Interface) []Option
		wantBound bool
	}{
		{"own informers", func(kubernetes.Interface) []Option { return nil }, false},
		{"injected informers", func(c kubernetes.Interface) []Option {
			return []Option{WithInformerFactory(informers.NewSharedInformerFactory(c, 0))}
		}, true},
		{"injected NewInformerFactory", func(c kubernetes.Interface) []Option {
			return []Option{WithInformerFactory(NewInformerFactory(c, 0, nil))}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			client := fake.NewClientset(bound.DeepCopy(), unbound.DeepCopy())
			c, err := NewProvisionController(client, testProvisioner, newStore(t), tt.opts(client)...)
			if err != nil {
				t.Fatal(err)
			}
			c.factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), c.claimInformer.HasSynced) {
				t.Fatal("claim cache did not sync")
			}
			got, err := c.claims.PersistentVolumeClaims("ns").Get("unbound")
			if err != nil {
				t.Fatal(err)
			}
			if got.ManagedFields != nil || got.Spec.Resources.Requests == nil {
				t.Errorf("cached unbound claim: managed fields %v, requests %v; want none, some", got.ManagedFields, got.Spec.Resources.Requests)
			}
			cachedBound, err := c.claims.PersistentVolumeClaims("ns").Get("bound")
			if tt.wantBound && (err != nil || cachedBound.ManagedFields != nil) {
				t.Errorf("bound claim: %v, %v; want it cached without managed fields", cachedBound, err)
			}
			if !tt.wantBound && !apierrors.IsNotFound(err) {
				t.Errorf("bound claim cached: %v, %v; want NotFound", cachedBound, err)
			}
		})
	}
}

// In the controller's own claim cache a claim stays while it is unbound,
// leaves it when bound (its handlers see a deletion of the whole bound
// claim, data source included) and comes back, whole, while it is deleted.
func TestBoundClaimsLeaveTheCache(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := claim("data", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
		c.Finalizers = []string{"kubernetes.io/pvc-protection"}
	})
	client := fake.NewClientset(pending.DeepCopy())
	factory := NewInformerFactory(client, 0, nil)
	informer := factory.Core().V1().PersistentVolumeClaims().Informer()
	deleted := make(chan *corev1.PersistentVolumeClaim, 10)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if c, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			deleted <- c
		}
	}}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("claim cache did not sync")
	}
	lister := factory.Core().V1().PersistentVolumeClaims().Lister().PersistentVolumeClaims("ns")
	cachedAs := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			c, err := lister.Get("data")
			switch want {
			case "absent":
				return apierrors.IsNotFound(err), nil
			case "unbound":
				return err == nil && c.Spec.VolumeName == "", nil
			default: // deleting
				return err == nil && c.DeletionTimestamp != nil && c.Spec.DataSource != nil, nil
			}
		})
		if err != nil {
			t.Fatalf("claim never cached as %s", want)
		}
	}
	cachedAs("unbound")

	bound := pending.DeepCopy()
	bound.Spec.VolumeName = "pvc-uid-data"
	bound.Status.Phase = corev1.ClaimBound
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cachedAs("absent")
	select {
	case c := <-deleted:
		if c.Spec.VolumeName != "pvc-uid-data" || c.Spec.DataSource == nil {
			t.Errorf("handlers saw the bound claim leave as %+v, want it whole", c.Spec)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handlers saw no deletion when the claim was bound")
	}

	// Further changes of the bound claim stay out.
	bound.Labels = map[string]string{"changed": "yes"}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fake API server deletes at once; a deletion held by a finalizer
	// is an update that sets the deletion timestamp.
	now := metav1.Now()
	bound.DeletionTimestamp = &now
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cachedAs("deleting")
}

// A PV whose first sight ends its provisioning operation may already be
// released (the claim was deleted while a repeated Provision saved it again):
// that event is the only one, so it must still queue the deletion.
func TestReleasedPVEndingItsOperationIsDeleted(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	c := claim("c", "gold")
	f.c.operations.track("pvc-uid-c", "ns/c", journal.Entry{Claim: c}, false)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-c", Annotations: map[string]string{AnnProvisionedBy: testProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:                      &corev1.ObjectReference{Namespace: "ns", Name: "c", UID: c.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
	f.c.volumeChanged(pv)
	if f.c.operations.hasClaim("ns/c") {
		t.Error("the operation did not end when its PV appeared")
	}
	if f.c.volumeQueue.Len() != 1 {
		t.Errorf("released PV not queued for deletion: %d queued", f.c.volumeQueue.Len())
	}
}

// What the claim informer's watch passes on: settled claims never enter the
// cache, and of one that arrives bound only its resource version goes on.
// BenchmarkBoundCacheFootprint prints what the controller's caches hold per
// bound claim and PV pair, decoded from protobuf as the binaries' clients
// decode them, filtered and trimmed as NewInformerFactory's informers do:
//
//	go test -run '^$' -bench BoundCacheFootprint -benchtime 100000x ./controller/
//
// B/pair counts live objects; inuse-B/pair the heap pages they keep, which
// is what the process's memory follows (a page holding one live object stays).
func BenchmarkBoundCacheFootprint(b *testing.B) {
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	before := heapAfterGC()
	filesystem := corev1.PersistentVolumeFilesystem
	class := "gold"
	for i := range b.N {
		uid := types.UID(fmt.Sprintf("%08x-1111-2222-3333-444455556666", i))
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%d", i), Namespace: "apps", UID: uid, ResourceVersion: strconv.Itoa(100000 + i),
				Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", AnnStorageProvisioner: testProvisioner},
				Finalizers:  []string{"kubernetes.io/pvc-protection"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:volumeName":{}}}`)}}},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-" + string(uid), StorageClassName: &class, VolumeMode: &filesystem,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(uid), UID: uid + "-pv", ResourceVersion: strconv.Itoa(300000 + i),
				Annotations: map[string]string{AnnProvisionedBy: testProvisioner},
				Labels:      map[string]string{LabelManagedBy: "provisioner"},
				Finalizers:  []string{"kubernetes.io/pv-protection", VolumeFinalizer}},
			Spec: corev1.PersistentVolumeSpec{StorageClassName: class, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, VolumeMode: &filesystem,
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "apps", Name: pvc.Name, UID: uid, ResourceVersion: "1"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pvc-" + string(uid)}}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}
		decodedClaim, decodedVolume := &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}
		if data, err := pvc.Marshal(); err != nil || decodedClaim.Unmarshal(data) != nil {
			b.Fatal(err)
		}
		if data, err := pv.Marshal(); err != nil || decodedVolume.Unmarshal(data) != nil {
			b.Fatal(err)
		}
		if !cachedecode.ClaimSettled(decodedClaim) { // never true here: the claim informer's filter
			trimmedClaim, _ := cachedecode.Trim(decodedClaim, nil)
			if err := claims.Add(trimmedClaim); err != nil {
				b.Fatal(err)
			}
		}
		trimmedVolume, _ := cachedecode.Trim(decodedVolume, nil)
		if err := volumes.Add(trimmedVolume); err != nil {
			b.Fatal(err)
		}
	}
	after := heapAfterGC()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/pair")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(b.N), "inuse-B/pair")
	runtime.KeepAlive(claims)
	runtime.KeepAlive(volumes)
}

func heapAfterGC() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// The claim and PV informers list, never by a watch-list stream, reading
// kube-apiserver's protobuf one item at a time, and watch from the list's
// version.
func TestInformersListWithoutStreaming(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	settled := claim("settled", "gold", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName, c.Status.Phase = "pvc-settled", corev1.ClaimBound
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	})
	lists := map[string]apiruntime.Object{
		"/api/v1/persistentvolumeclaims": &corev1.PersistentVolumeClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "42"},
			Items: []corev1.PersistentVolumeClaim{*claim("a", "gold"), *settled, *claim("b", "gold")}},
		"/api/v1/persistentvolumes": &corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "43"},
			Items: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "pv-b"}}}},
	}
	info, _ := apiruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), apiruntime.ContentTypeProtobuf)
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		requests = append(requests, fmt.Sprintf("%s watch=%s sendInitialEvents=%s resourceVersion=%s",
			r.URL.Path, q.Get("watch"), q.Get("sendInitialEvents"), q.Get("resourceVersion")))
		mu.Unlock()
		list, ok := lists[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if q.Get("watch") == "true" {
			w.Header().Set("Content-Type", apiruntime.ContentTypeProtobuf+";stream=watch")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", apiruntime.ContentTypeProtobuf)
		if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(list, w); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	defer cancel() // before srv.Close: the watches end with the context

	factory := NewInformerFactory(kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}), 0, nil)
	claims, volumes := factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes()
	claims.Informer()
	volumes.Informer()
	factory.Start(ctx.Done())
	syncCtx, synced := context.WithTimeout(ctx, 10*time.Second)
	defer synced()
	if !cache.WaitForCacheSync(syncCtx.Done(), claims.Informer().HasSynced, volumes.Informer().HasSynced) {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("caches did not sync; requests:\n%s", strings.Join(requests, "\n"))
	}
	var cached []string
	for _, c := range claims.Informer().GetStore().ListKeys() {
		cached = append(cached, "claim "+c)
	}
	for _, v := range volumes.Informer().GetStore().ListKeys() {
		cached = append(cached, "PV "+v)
	}
	slices.Sort(cached)
	if diff := cmp.Diff([]string{"PV pv-a", "PV pv-b", "claim ns/a", "claim ns/b"}, cached); diff != "" {
		t.Errorf("cached (-want +got):\n%s", diff)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(requests) >= 4, nil
	}); err != nil {
		t.Fatal("the informers did not watch after listing")
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(requests)
	want := []string{
		"/api/v1/persistentvolumeclaims watch= sendInitialEvents= resourceVersion=0",
		"/api/v1/persistentvolumeclaims watch=true sendInitialEvents= resourceVersion=42",
		"/api/v1/persistentvolumes watch= sendInitialEvents= resourceVersion=0",
		"/api/v1/persistentvolumes watch=true sendInitialEvents= resourceVersion=43",
	}
	if diff := cmp.Diff(want, requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
