// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Event reasons, the ones users of the established provisioners grep for.
const (
	EventProvisioning            = "Provisioning"
	EventProvisioningSucceeded   = "ProvisioningSucceeded"
	EventProvisioningFailed      = "ProvisioningFailed"
	EventProvisioningCleanup     = "ProvisioningCleanupFailed"
	EventVolumeFailedDelete      = "VolumeFailedDelete"
	eventAggregateThreshold      = 10 // Normal events of one reason in one flush beyond which they are aggregated
	eventRepeatWindow            = 10 * time.Minute
	eventRecentCap               = 4096
	eventFinalFlushTimeout       = 2 * time.Second
	eventMessageMaxLength        = 1024
	clusterScopedEventsNamespace = metav1.NamespaceDefault
)

// eventRecorder writes the controller's events. Warnings are written at once,
// one per object, and a repeated warning updates the count of the earlier
// one. Normal events are gathered for a flush interval: a "Provisioning" that
// is followed by success within it is dropped, and during a burst the events
// of one reason are aggregated into one event on the storage class, so that
// events never cost more API writes than the volumes themselves.
type eventRecorder struct {
	client    kubernetes.Interface
	component string
	instance  string
	interval  time.Duration
	metrics   *metrics

	mu       sync.Mutex
	normal   []pendingEvent
	warnings []pendingEvent
	recent   map[eventKey]*corev1.Event
	kick     chan struct{}
}

type pendingEvent struct {
	ref       corev1.ObjectReference
	class     string
	eventType string
	reason    string
	message   string
	at        time.Time
}

type eventKey struct {
	uid     types.UID
	reason  string
	message string
}

func newEventRecorder(client kubernetes.Interface, component, instance string, interval time.Duration, m *metrics) *eventRecorder {
	return &eventRecorder{
		client:    client,
		component: component,
		instance:  instance,
		interval:  interval,
		metrics:   m,
		recent:    map[eventKey]*corev1.Event{},
		kick:      make(chan struct{}, 1),
	}
}

func claimReference(claim *corev1.PersistentVolumeClaim) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
		Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
}

func volumeReference(pv *corev1.PersistentVolume) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: pv.Name, UID: pv.UID,
		ResourceVersion: pv.ResourceVersion}
}

// event queues an event about ref; class names the storage class for aggregation.
func (r *eventRecorder) event(ref corev1.ObjectReference, class, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > eventMessageMaxLength {
		msg = msg[:eventMessageMaxLength-3] + "..."
	}
	e := pendingEvent{ref: ref, class: class, eventType: eventType, reason: reason, message: msg, at: time.Now()}
	r.metrics.eventsEmitted.WithLabelValues(eventType).Inc()
	r.mu.Lock()
	if eventType == corev1.EventTypeWarning {
		r.warnings = append(r.warnings, e)
	} else {
		r.normal = append(r.normal, e)
	}
	r.mu.Unlock()
	if eventType == corev1.EventTypeWarning {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// run writes events until ctx ends, then writes what is left within a short bound.
func (r *eventRecorder) run(ctx context.Context) {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventFinalFlushTimeout)
			r.flush(final, true)
			cancel()
			return
		case <-r.kick:
			r.flush(ctx, false)
		case <-ticker.C:
			r.flush(ctx, true)
		}
	}
}

func (r *eventRecorder) flush(ctx context.Context, withNormal bool) {
	r.mu.Lock()
	warnings := r.warnings
	r.warnings = nil
	var normal []pendingEvent
	if withNormal {
		normal = r.normal
		r.normal = nil
	}
	r.mu.Unlock()
	for _, e := range warnings {
		r.write(ctx, e)
	}
	if len(normal) == 0 {
		return
	}
	normal = dropSuperseded(normal)
	// Aggregate per reason and class: a burst in one class must not hide
	// the single event of another.
	type group struct{ reason, class string }
	groups := map[group][]pendingEvent{}
	var order []group
	for _, e := range normal {
		g := group{e.reason, e.class}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], e)
	}
	for _, g := range order {
		events := groups[g]
		if len(events) <= eventAggregateThreshold {
			for _, e := range events {
				r.write(ctx, e)
			}
			continue
		}
		r.writeAggregated(ctx, g.class, events)
	}
}

// dropSuperseded removes "Provisioning" events of claims whose success is in
// the same batch: the success says all the first one would.
func dropSuperseded(events []pendingEvent) []pendingEvent {
	succeeded := map[types.UID]bool{}
	for _, e := range events {
		if e.reason == EventProvisioningSucceeded {
			succeeded[e.ref.UID] = true
		}
	}
	kept := events[:0]
	for _, e := range events {
		if e.reason == EventProvisioning && succeeded[e.ref.UID] {
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

// writeAggregated writes one event on the storage class for many events of
// one reason. It gives counts only: the event is in namespace "default", and
// the names of claims (and the volume named in any one claim's message) are
// not for readers of other namespaces.
func (r *eventRecorder) writeAggregated(ctx context.Context, class string, group []pendingEvent) {
	namespaces := map[string]bool{}
	for _, e := range group {
		namespaces[e.ref.Namespace] = true
	}
	first := group[0]
	agg := pendingEvent{
		ref:       corev1.ObjectReference{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1", Name: class},
		eventType: first.eventType,
		reason:    first.reason,
		message: fmt.Sprintf("%s for %d claims in %d namespaces (events of a burst, aggregated)",
			aggregatedSummary(first.reason), len(group), len(namespaces)),
		at: first.at,
	}
	if r.create(ctx, agg, 1) != nil {
		r.metrics.eventsWritten.WithLabelValues("aggregated").Inc()
	}
}

func aggregatedSummary(reason string) string {
	switch reason {
	case EventProvisioning:
		return "Provisioning started"
	case EventProvisioningSucceeded:
		return "Volumes provisioned"
	}
	return reason
}

func (r *eventRecorder) write(ctx context.Context, e pendingEvent) {
	key := eventKey{uid: e.ref.UID, reason: e.reason, message: e.message}
	r.mu.Lock()
	prev := r.recent[key]
	r.mu.Unlock()
	if prev != nil && e.at.Sub(prev.LastTimestamp.Time) < eventRepeatWindow {
		patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, prev.Count+1, e.at.UTC().Format(time.RFC3339))
		updated, err := r.client.CoreV1().Events(prev.Namespace).Patch(ctx, prev.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil {
			r.metrics.eventsWritten.WithLabelValues("repeat").Inc()
			r.remember(key, updated)
			return
		}
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Could not update event count", "reason", e.reason, "object", e.ref.Name, "err", err)
			return
		}
	}
	if created := r.create(ctx, e, 1); created != nil {
		r.metrics.eventsWritten.WithLabelValues("single").Inc()
		r.remember(key, created)
	}
}

func (r *eventRecorder) create(ctx context.Context, e pendingEvent, count int32) *corev1.Event {
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
		Count:               count,
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

func (r *eventRecorder) remember(key eventKey, ev *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recent) >= eventRecentCap {
		now := time.Now()
		for k, v := range r.recent {
			if now.Sub(v.LastTimestamp.Time) > eventRepeatWindow || len(r.recent) >= eventRecentCap {
				delete(r.recent, k)
			}
		}
	}
	r.recent[key] = ev
}
