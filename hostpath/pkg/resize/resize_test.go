// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package resize

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
)

const (
	testProvisioner = "kubeprov.io/hostpath"
	claimKey        = "ns/data"
)

// fakeExpander records its calls and answers with err.
type fakeExpander struct {
	notOwned bool
	err      error
	calls    []int64
}

func (f *fakeExpander) OwnsVolume(*corev1.PersistentVolume) bool { return !f.notOwned }

func (f *fakeExpander) ExpandVolume(_ context.Context, _ *corev1.PersistentVolume, newBytes int64) error {
	f.calls = append(f.calls, newBytes)
	return f.err
}

// newClaim is a claim bound to the PV "pv-data" with status capacity has,
// asking for wants.
func newClaim(wants, has string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "claim-uid", ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName: "pv-data",
			Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(wants)}},
		},
		Status: corev1.PersistentVolumeClaimStatus{
			Phase:    corev1.ClaimBound,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(has)},
			// Another controller's condition, which a resize must keep.
			Conditions: []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimVolumeModifyingVolume, Status: corev1.ConditionTrue}},
		},
	}
}

// newVolume is the PV of newClaim with capacity size.
func newVolume(size string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-data", ResourceVersion: "1", Annotations: map[string]string{controller.AnnProvisionedBy: testProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "claim-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/pv-data"}},
		},
	}
}

// inStatus sets the claim's resize state as a resizer left it.
func inStatus(claim *corev1.PersistentVolumeClaim, allocated string, status corev1.ClaimResourceStatus, conds ...corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaim {
	claim.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(allocated)}
	claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: status}
	for _, c := range conds {
		claim.Status.Conditions = append(claim.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return claim
}

// fixture is a Resizer over a fake clientset whose informer caches hold the
// given objects, as sample-controller's tests preload them.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	expander *fakeExpander
	recorder *record.FakeRecorder
	resizer  *Resizer
}

func newFixture(t *testing.T, expander *fakeExpander, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, opts ...Option) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(claim, pv)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	r, err := New(client, factory, expander, recorder, append([]Option{WithProvisionerNames(testProvisioner)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.queue.ShutDown)
	f := &fixture{t: t, ctx: ctx, client: client, expander: expander, recorder: recorder, resizer: r}
	f.cache(claim, pv)
	client.ClearActions()
	return f
}

// cache puts objects into the informers' caches, as a watch would.
func (f *fixture) cache(objs ...runtime.Object) {
	f.t.Helper()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			err = f.resizer.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Update(o)
		case *corev1.PersistentVolume:
			err = f.resizer.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Update(o)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

// writes lists the API writes as "verb resource[/subresource]".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

// events returns the events recorded so far ("Type Reason Message").
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) claim() *corev1.PersistentVolumeClaim {
	f.t.Helper()
	c, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(f.ctx, "data", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) volume() *corev1.PersistentVolume {
	f.t.Helper()
	pv, err := f.client.CoreV1().PersistentVolumes().Get(f.ctx, "pv-data", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pv
}

// expectReasons checks the events' types and reasons, in order.
func expectReasons(t *testing.T, events []string, want ...string) {
	t.Helper()
	var got []string
	for _, e := range events {
		fields := strings.Fields(e)
		got = append(got, fields[0]+" "+fields[1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want reasons %q", events, want)
	}
}

// expectFinished checks a claim whose resize to size is over.
func expectFinished(t *testing.T, claim *corev1.PersistentVolumeClaim, size string) {
	t.Helper()
	if got := claim.Status.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse(size)) != 0 {
		t.Errorf("claim status.capacity %s, want %s", got.String(), size)
	}
	if s, ok := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok {
		t.Errorf("claim allocatedResourceStatuses[storage] = %s, want none", s)
	}
	var types []corev1.PersistentVolumeClaimConditionType
	for _, c := range claim.Status.Conditions {
		types = append(types, c.Type)
	}
	if !slices.Equal(types, []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimVolumeModifyingVolume}) {
		t.Errorf("claim conditions %v, want only the other controller's ModifyingVolume", types)
	}
}

func expectCapacity(t *testing.T, pv *corev1.PersistentVolume, size string) {
	t.Helper()
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse(size)) != 0 {
		t.Errorf("PV capacity %s, want %s", got.String(), size)
	}
}

func TestResizeSucceeds(t *testing.T) {
	f := newFixture(t, &fakeExpander{}, newClaim("2Gi", "1Gi"), newVolume("1Gi"))
	if err := f.resizer.sync(f.ctx, claimKey); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.expander.calls, []int64{2 << 30}) {
		t.Errorf("ExpandVolume calls %v, want one with %d bytes", f.expander.calls, int64(2<<30))
	}
	// The CSI external-resizer's order: mark the claim, PV capacity, then the claim.
	if want := []string{"patch persistentvolumeclaims/status", "patch persistentvolumes", "patch persistentvolumeclaims/status"}; !slices.Equal(f.writes(), want) {
		t.Errorf("writes %q, want %q", f.writes(), want)
	}
	expectCapacity(t, f.volume(), "2Gi")
	claim := f.claim()
	expectFinished(t, claim, "2Gi")
	if got := claim.Status.AllocatedResources[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("claim allocatedResources[storage] %s, want 2Gi", got.String())
	}
	expectReasons(t, f.events(), "Normal "+EventResizing, "Normal "+EventResizeSuccessful)
}

// TestResizeMarksInProgress checks the claim as the Expander sees it: its
// status says that the controller's resize runs.
func TestResizeMarksInProgress(t *testing.T) {
	f := newFixture(t, &fakeExpander{err: errors.New("disk busy")}, newClaim("2Gi", "1Gi"), newVolume("1Gi"))
	err := f.resizer.sync(f.ctx, claimKey)
	if err == nil || !strings.Contains(err.Error(), "disk busy") {
		t.Fatalf("sync: %v, want the Expander's error, to retry", err)
	}
	claim := f.claim()
	if s := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; s != corev1.PersistentVolumeClaimControllerResizeInProgress {
		t.Errorf("allocatedResourceStatuses[storage] %q, want ControllerResizeInProgress", s)
	}
	if got := claim.Status.AllocatedResources[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("allocatedResources[storage] %s, want 2Gi", got.String())
	}
	if !hasCondition(claim, corev1.PersistentVolumeClaimResizing) || !hasCondition(claim, corev1.PersistentVolumeClaimVolumeModifyingVolume) {
		t.Errorf("conditions %+v, want Resizing and the other controller's ModifyingVolume", claim.Status.Conditions)
	}
	expectCapacity(t, f.volume(), "1Gi")
	events := f.events()
	expectReasons(t, events, "Normal "+EventResizing, "Warning "+EventResizeFailed)
	if !strings.Contains(events[1], "disk busy") {
		t.Errorf("event %q does not say why", events[1])
	}

	// The retry: the claim is marked already, so only the Expander is called.
	f.cache(claim)
	f.client.ClearActions()
	f.expander.err = nil
	if err := f.resizer.sync(f.ctx, claimKey); err != nil {
		t.Fatal(err)
	}
	if want := []string{"patch persistentvolumes", "patch persistentvolumeclaims/status"}; !slices.Equal(f.writes(), want) {
		t.Errorf("writes of the retry %q, want %q", f.writes(), want)
	}
	expectFinished(t, f.claim(), "2Gi")
}

// flakyExpander fails its first failures calls, recording how often the
// queue had requeued the claim by each call.
type flakyExpander struct {
	fakeExpander
	queue    interface{ NumRequeues(string) int }
	failures int

	mu       sync.Mutex
	requeues []int
}

func (f *flakyExpander) ExpandVolume(context.Context, *corev1.PersistentVolume, int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requeues = append(f.requeues, f.queue.NumRequeues(claimKey))
	if len(f.requeues) <= f.failures {
		return errors.New("disk busy")
	}
	return nil
}

// TestResizeRetriesWithBackoff: a failed resize is queued again, rate
// limited, until it succeeds, and then forgotten.
func TestResizeRetriesWithBackoff(t *testing.T) {
	client := fake.NewClientset(newClaim("2Gi", "1Gi"), newVolume("1Gi"))
	expander := &flakyExpander{failures: 2}
	r, err := New(client, informers.NewSharedInformerFactory(client, 0), expander, record.NewFakeRecorder(10),
		WithRetryInterval(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	expander.queue = r.queue
	runUntilResized(t, r, client)
	expander.mu.Lock()
	defer expander.mu.Unlock()
	// Each retry follows one more rate-limited requeue (a status write may
	// also queue the claim, and a failure before the expansion counts too).
	if got := expander.requeues; len(got) != 3 || got[0] != 0 || got[1] <= got[0] || got[2] <= got[1] {
		t.Errorf("requeues seen by the expansions %v, want 3 expansions, each after more requeues", got)
	}
	if n := r.queue.NumRequeues(claimKey); n != 0 {
		t.Errorf("requeues after success %d, want 0 (forgotten)", n)
	}
}

func TestResizeDoesNotFit(t *testing.T) {
	f := newFixture(t, &fakeExpander{err: fmt.Errorf("path /var/lib has 3Gi left: %w", ErrDoesNotFit)}, newClaim("100Gi", "1Gi"), newVolume("1Gi"))
	if err := f.resizer.sync(f.ctx, claimKey); err != nil {
		t.Fatalf("sync: %v, want nil: the failure is final", err)
	}
	claim := f.claim()
	if s := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; s != corev1.PersistentVolumeClaimControllerResizeInfeasible {
		t.Errorf("allocatedResourceStatuses[storage] %q, want ControllerResizeInfeasible", s)
	}
	var failed *corev1.PersistentVolumeClaimCondition
	for i, c := range claim.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimResizing {
			t.Errorf("condition Resizing still set: %+v", c)
		}
		if c.Type == corev1.PersistentVolumeClaimControllerResizeError {
			failed = &claim.Status.Conditions[i]
		}
	}
	if failed == nil || !strings.Contains(failed.Message, "3Gi left") {
		t.Errorf("condition ControllerResizeError %+v, want one with the Expander's message", failed)
	}
	expectCapacity(t, f.volume(), "1Gi")
	if slices.Contains(f.writes(), "patch persistentvolumes") {
		t.Errorf("writes %q: the PV must stay untouched", f.writes())
	}
	expectReasons(t, f.events(), "Normal "+EventResizing, "Warning "+EventResizeFailed)

	// Final until the request changes: no call, no write.
	f.cache(claim)
	f.client.ClearActions()
	if err := f.resizer.sync(f.ctx, claimKey); err != nil {
		t.Fatal(err)
	}
	if len(f.expander.calls) != 1 || len(f.writes()) != 0 || len(f.events()) != 0 {
		t.Errorf("after infeasible: calls %v, writes %q; want no new ones", f.expander.calls, f.writes())
	}
}

// TestResizeLoweredRequest: after an infeasible request the user asks for
// less (still more than the claim has), and that is resized.
func TestResizeLoweredRequest(t *testing.T) {
	claim := inStatus(newClaim("5Gi", "1Gi"), "100Gi", corev1.PersistentVolumeClaimControllerResizeInfeasible, corev1.PersistentVolumeClaimControllerResizeError)
	f := newFixture(t, &fakeExpander{}, claim, newVolume("1Gi"))
	if err := f.resizer.sync(f.ctx, claimKey); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.expander.calls, []int64{5 << 30}) {
		t.Errorf("ExpandVolume calls %v, want one with 5Gi", f.expander.calls)
	}
	expectCapacity(t, f.volume(), "5Gi")
	got := f.claim()
	expectFinished(t, got, "5Gi")
	if a := got.Status.AllocatedResources[corev1.ResourceStorage]; a.Cmp(resource.MustParse("5Gi")) != 0 {
		t.Errorf("allocatedResources[storage] %s, want 5Gi (the lowered request)", a.String())
	}
}

// TestResizeRestartHalfway: the PV has the new size but the claim does not
// (the resizer stopped between the two writes): only the claim is finished.
func TestResizeRestartHalfway(t *testing.T) {
	claim := inStatus(newClaim("2Gi", "1Gi"), "2Gi", corev1.PersistentVolumeClaimControllerResizeInProgress, corev1.PersistentVolumeClaimResizing)
	f := newFixture(t, &fakeExpander{}, claim, newVolume("2Gi"))
	if err := f.resizer.sync(f.ctx, claimKey); err != nil {
		t.Fatal(err)
	}
	if len(f.expander.calls) != 0 {
		t.Errorf("ExpandVolume calls %v, want none", f.expander.calls)
	}
	if want := []string{"patch persistentvolumeclaims/status"}; !slices.Equal(f.writes(), want) {
		t.Errorf("writes %q, want %q", f.writes(), want)
	}
	expectFinished(t, f.claim(), "2Gi")
	expectReasons(t, f.events(), "Normal "+EventResizeSuccessful)
}

// TestResizeLeavesAlone: claims that are not this Resizer's business get
// neither a call nor a write.
func TestResizeLeavesAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		expander *fakeExpander
		claim    func(*corev1.PersistentVolumeClaim)
		pv       func(*corev1.PersistentVolume)
	}{
		{name: "not owned", expander: &fakeExpander{notOwned: true}},
		{name: "another provisioner's", pv: func(pv *corev1.PersistentVolume) { pv.Annotations[controller.AnnProvisionedBy] = "example.com/other" }},
		{name: "no more asked", claim: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
		}},
		{name: "pending", claim: func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimPending }},
		{name: "PV of another claim", pv: func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "other-uid" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim, pv := newClaim("2Gi", "1Gi"), newVolume("1Gi")
			if tc.claim != nil {
				tc.claim(claim)
			}
			if tc.pv != nil {
				tc.pv(pv)
			}
			expander := tc.expander
			if expander == nil {
				expander = &fakeExpander{}
			}
			f := newFixture(t, expander, claim, pv)
			if err := f.resizer.sync(f.ctx, claimKey); err != nil {
				t.Fatal(err)
			}
			if len(expander.calls) != 0 || len(f.writes()) != 0 || len(f.events()) != 0 {
				t.Errorf("calls %v, writes %q: want none", expander.calls, f.writes())
			}
		})
	}
}

// TestResizeConflictRetried: a claim changed since the cache read it is not
// written over; the sync fails and is retried from the newer copy.
func TestResizeConflictRetried(t *testing.T) {
	f := newFixture(t, &fakeExpander{}, newClaim("2Gi", "1Gi"), newVolume("1Gi"))
	f.client.PrependReactor("patch", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(corev1.Resource("persistentvolumeclaims"), "data", errors.New("the object has been modified"))
	})
	if err := f.resizer.sync(f.ctx, claimKey); err == nil {
		t.Fatal("sync succeeded, want the conflict")
	}
	if len(f.expander.calls) != 0 {
		t.Errorf("ExpandVolume calls %v: the claim was not marked, want none", f.expander.calls)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	for _, opt := range []Option{WithRetryInterval(0, 1), WithExpandTimeout(-1), WithProvisionerNames("")} {
		if _, err := New(client, factory, &fakeExpander{}, record.NewFakeRecorder(1), opt); err == nil {
			t.Errorf("New accepted a bad option %#v", opt)
		}
	}
	if _, err := New(client, factory, nil, record.NewFakeRecorder(1)); err == nil {
		t.Error("New accepted a nil Expander")
	}
	if _, err := New(client, factory, &fakeExpander{}, record.NewFakeRecorder(1)); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

// TestRun: the informers queue a claim whose request grew, the workers
// resize it, and Run returns once its context ends.
func TestRun(t *testing.T) {
	client := fake.NewClientset(newClaim("2Gi", "1Gi"), newVolume("1Gi"))
	r, err := New(client, informers.NewSharedInformerFactory(client, 0), &fakeExpander{}, record.NewFakeRecorder(10))
	if err != nil {
		t.Fatal(err)
	}
	runUntilResized(t, r, client)
}

// runUntilResized runs r with two workers until the claim's status says
// 2Gi, then stops it and checks that Run returns nil.
func runUntilResized(t *testing.T, r *Resizer, client *fake.Clientset) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(ctx, 2) }()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
		size := c.Status.Capacity[corev1.ResourceStorage]
		return err == nil && size.Cmp(resource.MustParse("2Gi")) == 0, err
	})
	cancel()
	if err != nil {
		t.Errorf("claim not resized: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
