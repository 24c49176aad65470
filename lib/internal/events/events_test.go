// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2/ktesting"
)

// provisioningFailed is a warning reason, as lib/controller's EventProvisioningFailed.
const provisioningFailed = "ProvisioningFailed"

// fixture is a recorder writing to a fake clientset.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	r      *Recorder
}

func newFixture(t *testing.T, interval time.Duration) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	m := Metrics{
		Emitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "emitted"}, []string{"type"}),
		Written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "written"}, []string{"kind"}),
	}
	return &fixture{t: t, ctx: ctx, client: client, r: NewRecorder(client, "test", "instance", interval, m)}
}

// writes counts the client's calls of verb on resource.
func (f *fixture) writes(verb, resource string) int {
	return len(slices.DeleteFunc(f.client.Actions(), func(a k8stesting.Action) bool { return !a.Matches(verb, resource) }))
}

func claim(name, className string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &className}}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// eventsOn returns the events written about a claim, by reason.
func (f *fixture) eventsOn(pvc *corev1.PersistentVolumeClaim) map[string][]corev1.Event {
	f.t.Helper()
	list, err := f.client.CoreV1().Events(pvc.Namespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]corev1.Event{}
	for _, e := range list.Items {
		if e.InvolvedObject.UID == pvc.UID {
			out[e.Reason] = append(out[e.Reason], e)
		}
	}
	return out
}

func burst(n, namespaces int) []*corev1.PersistentVolumeClaim {
	claims := make([]*corev1.PersistentVolumeClaim, n)
	for i := range claims {
		claims[i] = claim(fmt.Sprintf("c%d", i), "gold", func(c *corev1.PersistentVolumeClaim) {
			c.Namespace = fmt.Sprintf("tenant-%d", i%namespaces)
			c.UID = types.UID(fmt.Sprintf("uid-%d", i))
		})
	}
	return claims
}

func provisioningStarted(r *Recorder, c *corev1.PersistentVolumeClaim) {
	r.Event(ClaimReference(c), "gold", corev1.EventTypeNormal, Provisioning, "External provisioner is provisioning volume for claim %q", c.Namespace+"/"+c.Name)
}

func provisioned(r *Recorder, c *corev1.PersistentVolumeClaim) {
	r.Event(ClaimReference(c), "gold", corev1.EventTypeNormal, ProvisioningSucceeded, "Successfully provisioned volume pvc-%s", c.UID)
}

func TestEveryClaimOfABurstGetsItsSuccessEvent(t *testing.T) {
	// A burst that the event budget writes in time: no aggregation.
	f := newFixture(t, time.Hour)
	r := f.r
	r.qps = 200
	claims := burst(1000, 3)
	for _, c := range claims {
		provisioningStarted(r, c)
		provisioned(r, c)
	}
	r.writeReady(f.ctx, true, eventBacklogMaxDelay)
	for _, c := range claims {
		events := f.eventsOn(c)
		if len(events[ProvisioningSucceeded]) != 1 || !strings.Contains(events[ProvisioningSucceeded][0].Message, "pvc-"+string(c.UID)) {
			t.Fatalf("claim %s: events %v, want its own ProvisioningSucceeded", c.Name, events)
		}
		if len(events[Provisioning]) != 0 {
			t.Fatalf("claim %s provisioned within the flush interval also got %q", c.Name, Provisioning)
		}
	}
	if n := f.writes("create", "events"); n != len(claims) {
		t.Fatalf("%d event writes for %d claims", n, len(claims))
	}
}

func TestProvisioningEventOnlyForClaimsThatWait(t *testing.T) {
	f := newFixture(t, time.Hour)
	r := f.r
	quick, slow := claim("quick", "gold"), claim("slow", "gold")
	provisioningStarted(r, quick)
	provisioningStarted(r, slow)
	provisioned(r, quick)
	// Before the flush interval is over only the success is written.
	r.writeReady(f.ctx, false, eventBacklogMaxDelay)
	if got := f.eventsOn(slow); len(got) != 0 {
		t.Fatalf("%q written before the flush interval: %v", Provisioning, got)
	}
	// The interval is over; the slow claim is still waiting.
	r.writeReady(f.ctx, true, eventBacklogMaxDelay)
	if got := f.eventsOn(slow); len(got[Provisioning]) != 1 {
		t.Fatalf("claim still provisioning after the flush interval: events %v, want %q", got, Provisioning)
	}
	if got := f.eventsOn(quick); len(got) != 1 || len(got[ProvisioningSucceeded]) != 1 {
		t.Fatalf("claim provisioned at once: events %v, want only %q", got, ProvisioningSucceeded)
	}
	provisioned(r, slow)
	r.writeReady(f.ctx, false, eventBacklogMaxDelay)
	if got := f.eventsOn(slow); len(got[ProvisioningSucceeded]) != 1 {
		t.Fatalf("slow claim: events %v", got)
	}
}

func TestProvisioningEventIsWrittenWhenDue(t *testing.T) {
	// The recorder's own loop, with a short interval: a claim that stays
	// unprovisioned gets its "Provisioning" event without anything else
	// happening.
	f := newFixture(t, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { f.r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The writers go idle first (nothing delayed, so no timer): the delayed
	// event alone must wake them.
	first := claim("first", "gold")
	provisioned(f.r, first)
	waitForEvent(t, f, first, ProvisioningSucceeded)
	slow := claim("slow", "gold")
	provisioningStarted(f.r, slow)
	waitForEvent(t, f, slow, Provisioning)
}

// waitForEvent waits for an event the recorder's own loop writes; a bound
// turns a lost wake-up into a failure instead of a hung test binary.
func waitForEvent(t *testing.T, f *fixture, pvc *corev1.PersistentVolumeClaim, reason string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for len(f.eventsOn(pvc)[reason]) == 0 {
		select {
		case <-deadline:
			t.Fatalf("no %s event on %s: the recorder's writers were never woken", reason, pvc.Name)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestEventsAggregatedOnlyUnderBackpressure(t *testing.T) {
	f := newFixture(t, time.Hour)
	r := f.r
	r.qps = 5 // the sidecars' default budget: 150 events in eventBacklogMaxDelay
	limit := r.backlogCap(eventBacklogMaxDelay)
	claims := burst(400, 2)
	for _, c := range claims {
		provisioningStarted(r, c)
	}
	r.writeReady(f.ctx, true, eventBacklogMaxDelay) // every claim waited
	for _, c := range claims {
		provisioned(r, c)
	}
	warned := claim("warned", "gold")
	r.Event(ClaimReference(warned), "gold", corev1.EventTypeWarning, provisioningFailed, "quota exceeded")
	f.client.ClearActions()
	r.writeReady(f.ctx, false, eventBacklogMaxDelay)

	if got := f.eventsOn(warned); len(got[provisioningFailed]) != 1 {
		t.Fatalf("warning under backpressure: %v", got)
	}
	if f.client.Actions()[0].(interface{ GetObject() runtime.Object }).GetObject().(*corev1.Event).Type != corev1.EventTypeWarning {
		t.Error("the warning was not written first")
	}
	singles, aggregates := 0, map[string]corev1.Event{}
	list, _ := f.client.CoreV1().Events("").List(f.ctx, metav1.ListOptions{})
	for _, e := range list.Items {
		switch {
		case e.Reason == ProvisioningSucceeded && strings.Contains(e.Message, "aggregated"):
			aggregates[e.Namespace] = e
		case e.Reason == ProvisioningSucceeded:
			singles++
		}
	}
	if singles != limit {
		t.Errorf("%d single success events, want as many as the budget writes in %v (%d)", singles, eventBacklogMaxDelay, limit)
	}
	if len(aggregates) != 2 {
		t.Fatalf("aggregated events in namespaces %v, want one in each of the 2 namespaces", aggregates)
	}
	total := 0
	for ns, e := range aggregates {
		// Counts only, about this namespace's claims, on one of them.
		var n int
		if _, err := fmt.Sscanf(e.Message, "Volumes provisioned for %d claims", &n); err != nil {
			t.Fatalf("aggregated event %q: %v", e.Message, err)
		}
		total += n
		if e.InvolvedObject.Kind != "PersistentVolumeClaim" || e.InvolvedObject.Namespace != ns {
			t.Errorf("aggregated event in %s is about %v", ns, e.InvolvedObject)
		}
		if strings.Contains(e.Message, "pvc-") || strings.Contains(e.Message, "tenant-") {
			t.Errorf("aggregated event names a volume or a namespace: %q", e.Message)
		}
	}
	if singles+total != len(claims) {
		t.Fatalf("%d single + %d aggregated successes for %d claims", singles, total, len(claims))
	}
}

func TestAggregationFoldsProvisioningEventsFirst(t *testing.T) {
	f := newFixture(t, time.Hour)
	r := f.r
	r.qps = 1 // 30 events in eventBacklogMaxDelay
	waiting := burst(60, 1)
	for _, c := range waiting {
		provisioningStarted(r, c)
	}
	done := claim("done", "gold", func(c *corev1.PersistentVolumeClaim) { c.Namespace = "tenant-0" })
	provisioned(r, done)
	r.writeReady(f.ctx, true, eventBacklogMaxDelay)
	if got := f.eventsOn(done); len(got[ProvisioningSucceeded]) != 1 || strings.Contains(got[ProvisioningSucceeded][0].Message, "aggregated") {
		t.Fatalf("a success was aggregated while Provisioning events could be: %v", got)
	}
}

func TestBudgetIsTheEventClientsRateLimiter(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1", RateLimiter: flowcontrol.NewTokenBucketRateLimiter(7, 14)}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := eventBudget(client); got != 7 {
		t.Fatalf("budget %v, want the rate limiter's 7 QPS", got)
	}
	unlimited, _ := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1", QPS: -1})
	if got := eventBudget(unlimited); got != 0 {
		t.Fatalf("budget of a client without a rate limiter: %v", got)
	}
}

func TestRepeatedWarningUpdatesCount(t *testing.T) {
	f := newFixture(t, time.Hour)
	ref := ClaimReference(claim("c", "gold"))
	for range 3 {
		f.r.Event(ref, "gold", corev1.EventTypeWarning, provisioningFailed, "quota exceeded")
		f.r.writeReady(f.ctx, false, eventBacklogMaxDelay)
	}
	// Repeats still waiting to be written are counted into one write.
	for range 2 {
		f.r.Event(ref, "gold", corev1.EventTypeWarning, provisioningFailed, "quota exceeded")
	}
	f.r.writeReady(f.ctx, false, eventBacklogMaxDelay)
	events, _ := f.client.CoreV1().Events("ns").List(f.ctx, metav1.ListOptions{})
	if len(events.Items) != 1 || events.Items[0].Count != 5 {
		t.Fatalf("events = %+v, want one with count 5", events.Items)
	}
	if n := f.writes("patch", "events"); n != 3 {
		t.Fatalf("%d count updates, want 3", n)
	}
}

// The events remembered for count updates stay bounded: a full memory
// forgets expired events first, and a repeat is still counted into the
// event written.
func TestRememberedEventsStayBounded(t *testing.T) {
	for _, expired := range []bool{true, false} {
		f := newFixture(t, time.Hour)
		r := f.r
		last := time.Now()
		if expired {
			last = last.Add(-2 * eventRepeatWindow)
		}
		for i := range eventRecentCap {
			r.recent[eventKey{uid: types.UID(fmt.Sprint(i))}] = writtenEvent{namespace: "ns", name: fmt.Sprint(i), count: 1, last: last}
		}
		ref := ClaimReference(claim("c", "gold"))
		for range 2 {
			r.Event(ref, "gold", corev1.EventTypeWarning, "ProvisioningFailed", "quota exceeded")
			r.writeReady(f.ctx, false, eventBacklogMaxDelay)
		}
		events, _ := f.client.CoreV1().Events("ns").List(f.ctx, metav1.ListOptions{})
		if len(events.Items) != 1 || events.Items[0].Count != 2 {
			t.Fatalf("expired %v: events = %+v, want one with count 2", expired, events.Items)
		}
		want := eventRecentCap
		if expired {
			want = 1
		}
		if len(r.recent) != want {
			t.Errorf("expired %v: %d events remembered, want %d", expired, len(r.recent), want)
		}
	}
}

func TestStopWritesWhatIsLeftWithinItsBound(t *testing.T) {
	f := newFixture(t, time.Hour)
	r := f.r
	r.qps = 10 // 20 events in FinalFlushTimeout
	claims := burst(100, 1)
	for _, c := range claims {
		provisioned(r, c)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	r.Run(ctx)
	n := f.writes("create", "events")
	if n == 0 || n > 21 {
		t.Fatalf("a stop wrote %d events for 100 waiting, want what the budget writes in %v and one aggregate", n, FinalFlushTimeout)
	}
	total := 0
	list, _ := f.client.CoreV1().Events("tenant-0").List(f.ctx, metav1.ListOptions{})
	for _, e := range list.Items {
		var k int
		if _, err := fmt.Sscanf(e.Message, "Volumes provisioned for %d claims", &k); err == nil {
			total += k
		} else {
			total++
		}
	}
	if total != len(claims) {
		t.Fatalf("events account for %d of %d claims", total, len(claims))
	}
}

// TestNamespacesTakeTurnsAndWarningsLeadWithinOne: one namespace's flood of
// warnings does not hold back another namespace's events: namespaces take
// turns for the budget, and within one, warnings come first.
func TestNamespacesTakeTurnsAndWarningsLeadWithinOne(t *testing.T) {
	r := newFixture(t, time.Second).r
	for _, c := range burst(5, 1) { // tenant-0
		r.Event(ClaimReference(c), "gold", corev1.EventTypeWarning, provisioningFailed, "refused")
	}
	calm := claim("calm", "gold", func(c *corev1.PersistentVolumeClaim) { c.Namespace, c.UID = "calm", "uid-calm" })
	provisioned(r, calm)
	r.Event(ClaimReference(calm), "gold", corev1.EventTypeWarning, provisioningFailed, "refused")
	var order []string
	r.mu.Lock()
	for e := r.pop(); e != nil; e = r.pop() {
		order = append(order, e.ref.Namespace+":"+e.eventType)
	}
	r.mu.Unlock()
	want := "tenant-0:Warning calm:Warning tenant-0:Warning calm:Normal tenant-0:Warning tenant-0:Warning tenant-0:Warning"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("events written in order\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkPopFromABacklog is the cost of choosing the next event from a
// backlog of 30 s of a 200/s budget, as one namespace's burst or spread
// over 100 namespaces.
func BenchmarkPopFromABacklog(b *testing.B) {
	for _, namespaces := range []int{1, 100} {
		b.Run(fmt.Sprintf("namespaces=%d", namespaces), func(b *testing.B) {
			r := NewRecorder(fake.NewClientset(), "test", "instance", time.Second, Metrics{})
			for _, c := range burst(6000, namespaces) {
				r.normal = r.queued(r.normal, &pendingEvent{ref: ClaimReference(c), eventType: corev1.EventTypeNormal, reason: ProvisioningSucceeded})
			}
			for b.Loop() {
				r.normal = r.queued(r.normal, r.pop())
			}
		})
	}
}
