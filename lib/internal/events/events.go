// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package events writes the controller's events within the event client's
// budget. The controller creates one Recorder, runs it (Run) beside its
// workers and queues events with Event; Recorder decides when each is
// written, and aggregates under back-pressure.
package events

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The reasons the recorder treats apart: lib/controller's
// EventProvisioning and EventProvisioningSucceeded.
const (
	Provisioning          = "Provisioning"
	ProvisioningSucceeded = "ProvisioningSucceeded"
)

// FinalFlushTimeout bounds how long Run writes what is left once its
// context ends (the controller gives its last journal write as long).
const FinalFlushTimeout = 2 * time.Second

const (
	// eventBacklogMaxDelay bounds how long a Normal event may wait for the
	// event client's budget: a backlog that takes longer to write is
	// aggregated.
	eventBacklogMaxDelay = 30 * time.Second
	// eventBacklogUnbudgeted bounds the backlog of a client without a rate
	// limiter, whose budget is only the API server's speed.
	eventBacklogUnbudgeted = 10000
	// eventWriters write at once, so that the budget, not the round trip of
	// one request, is what limits the events written.
	eventWriters                 = 4
	eventRepeatWindow            = 10 * time.Minute
	eventRecentCap               = 4096
	eventMessageMaxLength        = 1024
	clusterScopedEventsNamespace = metav1.NamespaceDefault
)

// Recorder writes the controller's events, each on its object, as the
// event client's budget (its rate limiter) allows:
//
//   - Namespaces take turns (round robin), so that one namespace's flood
//     never holds back another's events; within a namespace, warnings are
//     written first, one per object and message; a repeated warning
//     updates the count of the earlier one.
//   - "Provisioning" waits for the flush interval (WithEventFlushInterval):
//     a claim provisioned within it gets only its "ProvisioningSucceeded",
//     one still waiting gets both, as from the CSI external-provisioner.
//   - Other Normal events ("ProvisioningSucceeded") are written singly, in
//     order.
//   - Only when the Normal events waiting would take the budget longer than
//     eventBacklogMaxDelay to write are the excess aggregated: "Provisioning"
//     events first, then the latest others, into one event per namespace,
//     reason and class, on one of the claims, that gives counts only.
type Recorder struct {
	client    kubernetes.Interface
	component string
	instance  string
	interval  time.Duration
	metrics   Metrics
	// qps is the event client's budget in events per second; 0 when it has
	// no rate limiter.
	qps float64

	mu       sync.Mutex
	warnings []*pendingEvent
	normal   []*pendingEvent // ready to be written, oldest first
	delayed  []*pendingEvent // "Provisioning" events waiting for their due time
	starting map[types.UID]*pendingEvent
	// pendingWarnings finds a warning still waiting, to count a repeat into it.
	pendingWarnings map[eventKey]*pendingEvent
	recent          map[eventKey]writtenEvent
	// swept is when recent was last searched for expired events.
	swept  time.Time
	stopBy time.Time // when stopping: the end of the final flush
	// served counts the events popped; lastServed is its value when each
	// namespace's last one was, for round robin between namespaces.
	served     uint64
	lastServed map[string]uint64
	// waiting counts the entries of warnings and normal by namespace.
	waiting map[string]int
	kick    chan struct{}
}

// writtenEvent is what a repeat of an event needs of the one written: the
// decoded Event would keep a few hundred bytes more for each of
// eventRecentCap.
type writtenEvent struct {
	namespace, name string
	count           int32
	last            time.Time
}

// Metrics are the counters the recorder keeps (registered by the controller
// under their names: controller_events_emitted_total by type,
// controller_events_written_total by kind).
type Metrics struct {
	Emitted *prometheus.CounterVec
	Written *prometheus.CounterVec
}

type pendingEvent struct {
	ref       corev1.ObjectReference
	class     string
	eventType string
	reason    string
	message   string
	at        time.Time
	due       time.Time // for delayed events
	count     int32
	dropped   bool // superseded before it was written
	aggregate bool
}

type eventKey struct {
	uid     types.UID
	reason  string
	message string
}

func NewRecorder(client kubernetes.Interface, component, instance string, interval time.Duration, m Metrics) *Recorder {
	return &Recorder{
		client:          client,
		component:       component,
		instance:        instance,
		interval:        interval,
		metrics:         m,
		qps:             eventBudget(client),
		starting:        map[types.UID]*pendingEvent{},
		pendingWarnings: map[eventKey]*pendingEvent{},
		recent:          map[eventKey]writtenEvent{},
		lastServed:      map[string]uint64{},
		waiting:         map[string]int{},
		kick:            make(chan struct{}, 1),
	}
}

// eventBudget is the events per second the client's rate limiter allows; 0
// if it has none.
func eventBudget(client kubernetes.Interface) float64 {
	rc := client.CoreV1().RESTClient()
	if rc == nil {
		return 0
	}
	if rl := rc.GetRateLimiter(); rl != nil {
		return float64(rl.QPS())
	}
	return 0
}

// ClaimReference is the reference events about claim carry.
func ClaimReference(claim *corev1.PersistentVolumeClaim) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
		Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
}

// VolumeReference is the reference events about pv carry.
func VolumeReference(pv *corev1.PersistentVolume) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: pv.Name, UID: pv.UID,
		ResourceVersion: pv.ResourceVersion}
}

// Event queues an event about ref; class names the storage class, for
// aggregation.
func (r *Recorder) Event(ref corev1.ObjectReference, class, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > eventMessageMaxLength {
		msg = msg[:eventMessageMaxLength-3] + "..."
	}
	now := time.Now()
	e := &pendingEvent{ref: ref, class: class, eventType: eventType, reason: reason, message: msg, at: now, count: 1}
	r.metrics.Emitted.WithLabelValues(eventType).Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case eventType == corev1.EventTypeWarning:
		key := eventKey{uid: ref.UID, reason: reason, message: msg}
		if prev := r.pendingWarnings[key]; prev != nil {
			prev.count++
			return
		}
		r.pendingWarnings[key] = e
		r.warnings = r.queued(r.warnings, e)
	case reason == Provisioning:
		if prev := r.starting[ref.UID]; prev != nil {
			prev.dropped = true // a new attempt: its event replaces the earlier one
		}
		e.due = now.Add(r.interval)
		r.starting[ref.UID] = e
		r.delayed = append(r.delayed, e)
		// No early return: an idle writer waits without a timer and must
		// learn of the first delayed event, or it is never written.
	default:
		if reason == ProvisioningSucceeded {
			if prev := r.starting[ref.UID]; prev != nil {
				prev.dropped = true // the success says all "Provisioning" would
				delete(r.starting, ref.UID)
			}
		}
		r.normal = r.queued(r.normal, e)
	}
	r.poke()
}

func (r *Recorder) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run writes events until ctx ends, then what is left within
// FinalFlushTimeout (aggregating what the budget cannot write by then).
func (r *Recorder) Run(ctx context.Context) {
	writeCtx, cancelWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWrites()
	stopped := context.AfterFunc(ctx, func() { time.AfterFunc(FinalFlushTimeout, cancelWrites) })
	defer stopped()
	var wg sync.WaitGroup
	for range eventWriters {
		wg.Go(func() {
			for {
				e := r.next(ctx)
				if e == nil || writeCtx.Err() != nil {
					return
				}
				r.write(writeCtx, e)
			}
		})
	}
	wg.Wait()
}

// next returns the next event to write, waiting for one; nil once ctx has
// ended and nothing is left.
func (r *Recorder) next(ctx context.Context) *pendingEvent {
	for {
		e, wait, stopping := r.take(ctx)
		if e != nil {
			return e
		}
		if stopping {
			return nil
		}
		r.waitFor(ctx, wait)
	}
}

// take takes the next event ready to be written (nil if none), after
// promoting the delayed ones that are due and aggregating what the budget
// cannot write in time. wait is how long until the next delayed event is
// due (-1: there is none); stopping says ctx has ended.
func (r *Recorder) take(ctx context.Context) (e *pendingEvent, wait time.Duration, stopping bool) {
	r.mu.Lock()
	now := time.Now()
	stopping = ctx.Err() != nil
	horizon := r.horizon(now, stopping)
	r.promote(now, stopping)
	r.relieve(horizon)
	e = r.pop()
	wait = -1
	if len(r.delayed) > 0 {
		wait = max(r.delayed[0].due.Sub(now), 0)
	}
	more := len(r.warnings) > 0 || len(r.normal) > 0
	r.mu.Unlock()
	if e != nil && more {
		r.poke() // another writer may take the next one
	}
	return e, wait, stopping
}

// horizon is the time within which the Normal events waiting must be
// written: eventBacklogMaxDelay, and when stopping what is left of the
// final flush. r.mu is held.
func (r *Recorder) horizon(now time.Time, stopping bool) time.Duration {
	if !stopping {
		return eventBacklogMaxDelay
	}
	if r.stopBy.IsZero() {
		r.stopBy = now.Add(FinalFlushTimeout)
	}
	return max(r.stopBy.Sub(now), 0)
}

// waitFor waits until ctx ends, an event is queued (kick) or, unless wait
// is negative, wait has passed.
func (r *Recorder) waitFor(ctx context.Context, wait time.Duration) {
	var due <-chan time.Time
	if wait >= 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		due = timer.C
	}
	select {
	case <-ctx.Done():
	case <-r.kick:
	case <-due:
	}
}

// promote moves the "Provisioning" events that are due (all of them when
// stopping) to the Normal events ready to be written; r.mu is held.
func (r *Recorder) promote(now time.Time, all bool) {
	n := 0
	for _, e := range r.delayed {
		if !all && e.due.After(now) {
			break
		}
		n++
		if !e.dropped {
			r.normal = r.queued(r.normal, e)
		}
	}
	r.delayed = r.delayed[n:]
}

// pop takes the next event to write: of the namespaces with events
// waiting, the one served longest ago, and of its events the first warning,
// else the first Normal one. Round robin between namespaces: one namespace's
// flood delays another's next event by at most one write per namespace
// waiting. r.mu is held.
func (r *Recorder) pop() *pendingEvent {
	for len(r.normal) > 0 && r.normal[0].dropped {
		e := r.normal[0]
		r.normal = r.normal[1:]
		r.unqueued(e)
		r.unstart(e)
	}
	list, i := r.fairest()
	if list == nil {
		return nil
	}
	e := (*list)[i]
	if i == 0 {
		*list = (*list)[1:] // the common case, without moving the rest
	} else {
		*list = slices.Delete(*list, i, i+1)
	}
	if len(r.lastServed) >= eventRecentCap {
		clear(r.lastServed) // every namespace starts even again
	}
	r.unqueued(e)
	r.served++
	r.lastServed[e.ref.Namespace] = r.served
	if e.eventType == corev1.EventTypeWarning {
		delete(r.pendingWarnings, eventKey{uid: e.ref.UID, reason: e.reason, message: e.message})
	}
	r.unstart(e)
	return e
}

// unstart forgets e as the "Provisioning" event its claim waits with, if it
// is that one; r.mu is held.
func (r *Recorder) unstart(e *pendingEvent) {
	if e.reason == Provisioning && r.starting[e.ref.UID] == e {
		delete(r.starting, e.ref.UID)
	}
}

// queued appends e to list, counting it in waiting; r.mu is held.
func (r *Recorder) queued(list []*pendingEvent, e *pendingEvent) []*pendingEvent {
	r.waiting[e.ref.Namespace]++
	return append(list, e)
}

// unqueued uncounts e, taken from warnings or normal; r.mu is held.
func (r *Recorder) unqueued(e *pendingEvent) {
	if r.waiting[e.ref.Namespace]--; r.waiting[e.ref.Namespace] <= 0 {
		delete(r.waiting, e.ref.Namespace)
	}
}

// fairest finds the first event, warnings before Normal ones, of the
// namespace served longest ago; r.mu is held. The search ends once every
// namespace with events waiting has been seen: a burst of one namespace
// costs one step, not one per event waiting.
func (r *Recorder) fairest() (list *[]*pendingEvent, index int) {
	s := fairestSearch{seen: map[string]bool{}}
	for _, l := range []*[]*pendingEvent{&r.warnings, &r.normal} {
		if len(s.seen) == len(r.waiting) || r.scan(&s, l) {
			break
		}
	}
	return s.list, s.index
}

// fairestSearch is where fairest's search stands: the best event found so
// far (in list, at index), when its namespace was served, and the
// namespaces seen.
type fairestSearch struct {
	list   *[]*pendingEvent
	index  int
	oldest uint64
	seen   map[string]bool
}

// scan looks at the first event in l of each namespace not yet seen; it
// reports whether the search is over: an event of a namespace never served
// was found, and none comes before it. r.mu is held.
func (r *Recorder) scan(s *fairestSearch, l *[]*pendingEvent) (over bool) {
	previous, havePrevious := "", false
	for i, e := range *l {
		ns := e.ref.Namespace
		// A burst comes in runs of one namespace: comparing with the
		// previous event spares most map lookups.
		if e.dropped || (havePrevious && ns == previous) {
			continue
		}
		previous, havePrevious = ns, true
		if s.seen[ns] {
			continue
		}
		s.seen[ns] = true
		if served := r.lastServed[ns]; s.list == nil || served < s.oldest {
			s.list, s.index, s.oldest = l, i, served
			if served == 0 {
				return true // never served: none comes before it
			}
		}
		if len(s.seen) == len(r.waiting) {
			return false
		}
	}
	return false
}

// backlogCap is how many Normal events the budget writes within horizon.
func (r *Recorder) backlogCap(horizon time.Duration) int {
	if r.qps <= 0 {
		return eventBacklogUnbudgeted
	}
	return int(r.qps * horizon.Seconds())
}

// relieve aggregates the Normal events beyond what the budget can write
// within horizon: "Provisioning" events first (their claim's success is
// still to come), then the latest others, so that the earliest ones are
// still written singly. r.mu is held.
func (r *Recorder) relieve(horizon time.Duration) {
	limit := r.backlogCap(horizon)
	if len(r.normal) <= limit {
		return // the common case, without counting
	}
	live := 0
	for _, e := range r.normal {
		if !e.dropped {
			live++
		}
	}
	if live <= limit {
		return
	}
	folded, kept, live := foldStarting(r.normal, live, limit)
	if live > limit {
		folded, kept = foldLatest(folded, kept, limit)
	}
	for _, e := range folded {
		r.unstart(e)
	}
	r.normal = append(aggregate(folded), kept...)
	r.recount()
}

// foldStarting takes "Provisioning" events, earliest first, out of normal
// until the live events left fit limit; dropped events go too. It returns
// them, the events kept, and how many live events are left.
func foldStarting(normal []*pendingEvent, live, limit int) (folded, kept []*pendingEvent, left int) {
	kept = normal[:0:0]
	for _, e := range normal {
		switch {
		case e.dropped:
		case live > limit && e.reason == Provisioning && !e.aggregate:
			folded = append(folded, e)
			live--
		default:
			kept = append(kept, e)
		}
	}
	return folded, kept, live
}

// foldLatest keeps the earliest limit single events of kept (aggregates
// always stay) and adds the others to folded.
func foldLatest(folded, kept []*pendingEvent, limit int) (moreFolded, trimmed []*pendingEvent) {
	var singles int
	trimmed = kept[:0:0]
	for _, e := range kept {
		if e.aggregate || singles < limit {
			if !e.aggregate {
				singles++
			}
			trimmed = append(trimmed, e)
			continue
		}
		folded = append(folded, e)
	}
	return folded, trimmed
}

// recount counts the events of warnings and normal by namespace again;
// r.mu is held.
func (r *Recorder) recount() {
	clear(r.waiting)
	for _, l := range [][]*pendingEvent{r.warnings, r.normal} {
		for _, e := range l {
			r.waiting[e.ref.Namespace]++
		}
	}
}

// aggregate folds events into one per namespace, reason and class, each on
// the last claim of its group, in that claim's namespace. It gives counts
// only and names no volume: a tenant reads it about their own claims, and
// one volume's name would be wrong for all the others.
func aggregate(events []*pendingEvent) []*pendingEvent {
	type group struct{ namespace, reason, class string }
	counts := map[group]int{}
	last := map[group]*pendingEvent{}
	var order []group
	for _, e := range events {
		g := group{e.ref.Namespace, e.reason, e.class}
		if _, ok := counts[g]; !ok {
			order = append(order, g)
		}
		counts[g] += int(e.count)
		last[g] = e
	}
	out := make([]*pendingEvent, 0, len(order))
	for _, g := range order {
		e := last[g]
		out = append(out, &pendingEvent{
			ref:       e.ref,
			class:     g.class,
			eventType: e.eventType,
			reason:    g.reason,
			message: fmt.Sprintf("%s for %d claims of StorageClass %q in this namespace, this one among them (their events were aggregated: the provisioner's event budget was exhausted)",
				aggregatedSummary(g.reason), counts[g], g.class),
			at:        e.at,
			count:     1,
			aggregate: true,
		})
	}
	return out
}

func aggregatedSummary(reason string) string {
	switch reason {
	case Provisioning:
		return "Provisioning started"
	case ProvisioningSucceeded:
		return "Volumes provisioned"
	}
	return reason
}

// writeReady writes, one after the other, every event ready now (with all,
// also the "Provisioning" events not yet due), aggregating what the budget
// cannot write within horizon.
func (r *Recorder) writeReady(ctx context.Context, all bool, horizon time.Duration) {
	for {
		r.mu.Lock()
		r.promote(time.Now(), all)
		r.relieve(horizon)
		e := r.pop()
		r.mu.Unlock()
		if e == nil {
			return
		}
		r.write(ctx, e)
	}
}

func (r *Recorder) write(ctx context.Context, e *pendingEvent) {
	key := eventKey{uid: e.ref.UID, reason: e.reason, message: e.message}
	r.mu.Lock()
	prev, ok := r.recent[key]
	r.mu.Unlock()
	if ok && e.at.Sub(prev.last) < eventRepeatWindow {
		patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, prev.count+e.count, e.at.UTC().Format(time.RFC3339))
		updated, err := r.client.CoreV1().Events(prev.namespace).Patch(ctx, prev.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil {
			r.metrics.Written.WithLabelValues("repeat").Inc()
			r.remember(key, updated)
			return
		}
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Could not update event count", "reason", e.reason, "object", e.ref.Name, "err", err)
			return
		}
	}
	if created := r.create(ctx, e); created != nil {
		kind := "single"
		if e.aggregate {
			kind = "aggregated"
		}
		r.metrics.Written.WithLabelValues(kind).Inc()
		r.remember(key, created)
	}
}

func (r *Recorder) create(ctx context.Context, e *pendingEvent) *corev1.Event {
	ns := e.ref.Namespace
	if ns == "" {
		ns = clusterScopedEventsNamespace
	}
	t := metav1.NewTime(e.at)
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", e.ref.Name, e.at.UnixNano()), Namespace: ns},
		InvolvedObject:      e.ref,
		Reason:              e.reason,
		Message:             e.message,
		Type:                e.eventType,
		Source:              corev1.EventSource{Component: r.component},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               e.count,
		ReportingController: r.component,
		ReportingInstance:   r.instance,
	}
	created, err := r.client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not write event", "reason", e.reason, "object", e.ref.Name, "err", err)
		return nil
	}
	return created
}

func (r *Recorder) remember(key eventKey, ev *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, known := r.recent[key]; !known && len(r.recent) >= eventRecentCap {
		// Searching for expired events reads all of them: at most once a
		// second, or a full map would cost that for every event written.
		if now := time.Now(); now.Sub(r.swept) >= time.Second {
			r.swept = now
			for k, v := range r.recent {
				if now.Sub(v.last) > eventRepeatWindow {
					delete(r.recent, k)
				}
			}
		}
		for k := range r.recent {
			if len(r.recent) < eventRecentCap {
				break
			}
			delete(r.recent, k)
		}
	}
	r.recent[key] = writtenEvent{namespace: ev.Namespace, name: ev.Name, count: ev.Count, last: ev.LastTimestamp.Time}
}

// Pending is an event waiting to be written, as the controller's tests see it.
type Pending struct {
	Ref     corev1.ObjectReference
	Reason  string
	Message string
}

// Pending returns the events queued and not yet written, superseded ones
// left out.
func (r *Recorder) Pending() []Pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Pending
	for _, q := range [][]*pendingEvent{r.warnings, r.normal, r.delayed} {
		for _, e := range q {
			if !e.dropped {
				out = append(out, Pending{Ref: e.ref, Reason: e.reason, Message: e.message})
			}
		}
	}
	return out
}
