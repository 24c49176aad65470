// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// All waits below watch (list, then watch from that list's resourceVersion, as an
// informer does), so they see every state the object passes through and return as
// soon as the condition holds. They are bounded only by ctx; on failure the error
// wraps the context's error (test it with errors.Is(err, context.DeadlineExceeded))
// and shows the object's current state and events.

// WaitForPVCBound waits until the PVC is Bound and its PV is Bound to it, and
// returns both.
func WaitForPVCBound(ctx context.Context, c kubernetes.Interface, ns, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, error) {
	pvc, err := waitForPVC(ctx, c, ns, name, "to be Bound", func(pvc *corev1.PersistentVolumeClaim) bool {
		return pvc.Status.Phase == corev1.ClaimBound
	})
	if err != nil {
		return nil, nil, err
	}
	// The PV controller binds the PV first, so this normally returns at once.
	pv, err := WaitForPVPhase(ctx, c, pvc.Spec.VolumeName, corev1.VolumeBound)
	if err != nil {
		return pvc, nil, fmt.Errorf("PVC %s/%s is Bound to PV %s: %w", ns, name, pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return pvc, pv, fmt.Errorf("PVC %s/%s is Bound to PV %s, but the PV's claimRef is %+v", ns, name, pv.Name, ref)
	}
	return pvc, pv, nil
}

// WaitForPVCAnnotation waits until the PVC has the annotation key and returns its
// value.
func WaitForPVCAnnotation(ctx context.Context, c kubernetes.Interface, ns, name, key string) (string, error) {
	pvc, err := waitForPVC(ctx, c, ns, name, "to have annotation "+key, func(pvc *corev1.PersistentVolumeClaim) bool {
		_, ok := pvc.Annotations[key]
		return ok
	})
	if err != nil {
		return "", err
	}
	return pvc.Annotations[key], nil
}

// WaitForPVCDeleted waits until the PVC is gone, finalizers and all. It returns at
// once if the PVC does not exist.
func WaitForPVCDeleted(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	klog.FromContext(ctx).V(4).Info("Waiting for PVC to be deleted", "pvc", klog.KRef(ns, name))
	return waitForDeleted(ctx, pvcListWatch(c, ns, name), &corev1.PersistentVolumeClaim{}, ns, name,
		func(ctx context.Context) string { return describePVC(ctx, c, ns, name) },
		fmt.Sprintf("PVC %s/%s to be deleted", ns, name))
}

// WaitForPVPhase waits until the PV is in phase and returns it.
func WaitForPVPhase(ctx context.Context, c kubernetes.Interface, name string, phase corev1.PersistentVolumePhase) (*corev1.PersistentVolume, error) {
	klog.FromContext(ctx).V(4).Info("Waiting for PV phase", "pv", klog.KRef("", name), "phase", phase)
	return waitFor(ctx, pvListWatch(c, name), &corev1.PersistentVolume{}, "", name,
		func(pv *corev1.PersistentVolume) bool { return pv.Status.Phase == phase },
		func(ctx context.Context) string { return describePV(ctx, c, name) },
		fmt.Sprintf("PV %s to be %s", name, phase))
}

// WaitForPVDeleted waits until the PV is gone, finalizers and all. It returns at
// once if the PV does not exist.
func WaitForPVDeleted(ctx context.Context, c kubernetes.Interface, name string) error {
	klog.FromContext(ctx).V(4).Info("Waiting for PV to be deleted", "pv", klog.KRef("", name))
	return waitForDeleted(ctx, pvListWatch(c, name), &corev1.PersistentVolume{}, "", name,
		func(ctx context.Context) string { return describePV(ctx, c, name) },
		fmt.Sprintf("PV %s to be deleted", name))
}

// WaitForEvent waits for an event with the given reason about obj (a PVC, a PV or
// any other typed object) and returns it; an event recorded before the call counts.
// Events are matched by the object's UID, or by kind, namespace and name when obj
// has no UID (built locally rather than read from the API).
func WaitForEvent(ctx context.Context, c kubernetes.Interface, obj runtime.Object, reason string) (*corev1.Event, error) {
	ref, err := newEventFilter(obj)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Waiting for event", "kind", ref.kind, "object", klog.KRef(ref.namespace, ref.name), "reason", reason)
	sel := fields.AndSelectors(ref.selector(), fields.OneTermEqualSelector("reason", reason)).String()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return c.CoreV1().Events(ref.namespace).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return c.CoreV1().Events(ref.namespace).Watch(ctx, opts)
		},
	}, c)
	ev, err := until(ctx, lw, &corev1.Event{}, func(ev *corev1.Event) bool { return ev.Reason == reason && ref.matches(ev) })
	if err != nil {
		return nil, waitError(ctx, err, fmt.Sprintf("event %s about %s %s", reason, ref.kind, klog.KRef(ref.namespace, ref.name)),
			func(ctx context.Context) string { return describeCurrent(ctx, c, obj) })
	}
	return ev, nil
}

// ListEvents returns the events about obj (matched as in WaitForEvent), oldest
// first.
func ListEvents(ctx context.Context, c kubernetes.Interface, obj runtime.Object) ([]corev1.Event, error) {
	ref, err := newEventFilter(obj)
	if err != nil {
		return nil, err
	}
	list, err := c.CoreV1().Events(ref.namespace).List(ctx, metav1.ListOptions{FieldSelector: ref.selector().String()})
	if err != nil {
		return nil, fmt.Errorf("listing events of %s %s: %w", ref.kind, klog.KRef(ref.namespace, ref.name), err)
	}
	var events []corev1.Event
	for _, ev := range list.Items {
		// Filter again: not every client (fake clientsets) honors field selectors.
		if ref.matches(&ev) {
			events = append(events, ev)
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return eventTime(&events[i]).Before(eventTime(&events[j])) })
	return events, nil
}

// eventFilter identifies the object events are about. Events about a namespaced
// object are in its namespace; those about a cluster-scoped object (a PV) are in
// "default" with client-go's recorder but may be elsewhere with others, so for
// those namespace is "", which searches all namespaces.
type eventFilter struct {
	kind, namespace, name string
	uid                   string
}

func newEventFilter(obj runtime.Object) (*eventFilter, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("events are about objects with metadata, not %T: %w", obj, err)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		// Objects from typed clients carry no TypeMeta; the scheme knows their kind.
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			return nil, fmt.Errorf("cannot tell the kind of %T: %w", obj, err)
		}
		kind = gvks[0].Kind
	}
	return &eventFilter{kind: kind, namespace: m.GetNamespace(), name: m.GetName(), uid: string(m.GetUID())}, nil
}

func (f *eventFilter) selector() fields.Selector {
	if f.uid != "" {
		return fields.OneTermEqualSelector("involvedObject.uid", f.uid)
	}
	set := fields.Set{"involvedObject.kind": f.kind, "involvedObject.name": f.name}
	if f.namespace != "" {
		set["involvedObject.namespace"] = f.namespace
	}
	return fields.SelectorFromSet(set)
}

func (f *eventFilter) matches(ev *corev1.Event) bool {
	io := ev.InvolvedObject
	if f.uid != "" {
		return string(io.UID) == f.uid
	}
	return io.Kind == f.kind && io.Name == f.name && io.Namespace == f.namespace
}

// eventTime is when the event last happened, whichever API recorded it.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	default:
		return ev.CreationTimestamp.Time
	}
}

// waitForPVC waits until cond holds for the PVC and returns it.
func waitForPVC(ctx context.Context, c kubernetes.Interface, ns, name, what string, cond func(*corev1.PersistentVolumeClaim) bool) (*corev1.PersistentVolumeClaim, error) {
	klog.FromContext(ctx).V(4).Info("Waiting for PVC", "pvc", klog.KRef(ns, name), "condition", what)
	return waitFor(ctx, pvcListWatch(c, ns, name), &corev1.PersistentVolumeClaim{}, ns, name, cond,
		func(ctx context.Context) string { return describePVC(ctx, c, ns, name) },
		fmt.Sprintf("PVC %s/%s %s", ns, name, what))
}

// object is what the typed waits work on.
type object interface {
	runtime.Object
	metav1.Object
}

// waitFor waits until cond holds for the object ns/name that lw lists and watches;
// exemplar is an empty object of its type.
func waitFor[T object](ctx context.Context, lw cache.ListerWatcher, exemplar T, ns, name string, cond func(T) bool, state func(context.Context) string, what string) (T, error) {
	obj, err := until(ctx, lw, exemplar, func(obj T) bool {
		// Check the name even though lw selects it: fake clientsets ignore field selectors.
		return obj.GetNamespace() == ns && obj.GetName() == name && cond(obj)
	})
	if err != nil {
		return obj, waitError(ctx, err, what, state)
	}
	return obj, nil
}

// until runs an informer on lw until cond holds for an added or updated object;
// exemplar is an empty object of the type lw lists.
func until[T runtime.Object](ctx context.Context, lw cache.ListerWatcher, exemplar T, cond func(T) bool) (T, error) {
	var zero T
	ev, err := watchtools.UntilWithSync(ctx, lw, exemplar, nil, func(ev watch.Event) (bool, error) {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			return false, nil
		}
		obj, ok := ev.Object.(T)
		return ok && cond(obj), nil
	})
	if err != nil {
		return zero, err
	}
	return ev.Object.(T), nil
}

// waitForDeleted waits until the object ns/name is not in lw's list any more.
func waitForDeleted(ctx context.Context, lw cache.ListerWatcher, objType runtime.Object, ns, name string, state func(context.Context) string, what string) error {
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	_, err := watchtools.UntilWithSync(ctx, lw, objType,
		func(store cache.Store) (bool, error) {
			_, exists, err := store.GetByKey(key)
			return !exists, err
		},
		func(ev watch.Event) (bool, error) {
			if ev.Type != watch.Deleted {
				return false, nil
			}
			m, err := meta.Accessor(ev.Object)
			return err == nil && m.GetNamespace() == ns && m.GetName() == name, nil
		})
	if err != nil {
		return waitError(ctx, err, what, state)
	}
	return nil
}

func pvcListWatch(c kubernetes.Interface, ns, name string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return c.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return c.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, opts)
		},
	}, c)
}

func pvListWatch(c kubernetes.Interface, name string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return c.CoreV1().PersistentVolumes().List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return c.CoreV1().PersistentVolumes().Watch(ctx, opts)
		},
	}, c)
}

// waitError explains a failed wait: what was expected, why it stopped (the
// context's cause when it ended, so errors.Is works), and the current state.
func waitError(ctx context.Context, err error, what string, state func(context.Context) string) error {
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	// The caller's context is usually over by now; the state deserves a few seconds.
	stateCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return fmt.Errorf("waiting for %s: %w\ncurrent state:\n%s", what, err, indent(state(stateCtx)))
}

// describeCurrent reads obj again if it is a PVC or PV and describes it.
func describeCurrent(ctx context.Context, c kubernetes.Interface, obj runtime.Object) string {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		return describePVC(ctx, c, o.Namespace, o.Name)
	case *corev1.PersistentVolume:
		return describePV(ctx, c, o.Name)
	default:
		return describe(ctx, c, obj, nil)
	}
}

func describePVC(ctx context.Context, c kubernetes.Interface, ns, name string) string {
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	return describe(ctx, c, pvc, err)
}

func describePV(ctx context.Context, c kubernetes.Interface, name string) string {
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	return describe(ctx, c, pv, err)
}

// describe renders an object (without managedFields) and its events; getErr is
// the error of reading it.
func describe(ctx context.Context, c kubernetes.Interface, obj runtime.Object, getErr error) string {
	switch {
	case apierrors.IsNotFound(getErr):
		return "not found"
	case getErr != nil:
		return fmt.Sprintf("cannot read it: %v", getErr)
	}
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	var b strings.Builder
	if y, err := yaml.Marshal(obj); err != nil {
		fmt.Fprintf(&b, "%#v\n", obj)
	} else {
		b.Write(y)
	}
	events, err := ListEvents(ctx, c, obj)
	switch {
	case err != nil:
		fmt.Fprintf(&b, "events: %v\n", err)
	case len(events) == 0:
		b.WriteString("events: none\n")
	default:
		b.WriteString("events:\n")
		for _, ev := range events {
			fmt.Fprintf(&b, "- %s %s (x%d, from %s): %s\n", ev.Type, ev.Reason, max(ev.Count, 1), eventSource(&ev), ev.Message)
		}
	}
	return b.String()
}

func eventSource(ev *corev1.Event) string {
	if ev.ReportingController != "" {
		return ev.ReportingController
	}
	return ev.Source.Component
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// WaitForNoPods waits until no pod matching selector ("" for all) is left
// in ns; on timeout the error names those left, with their phases.
func WaitForNoPods(ctx context.Context, c kubernetes.Interface, ns, selector string) error {
	var left []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil // the API server may be restarting: look again
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name+" ("+string(p.Status.Phase)+")")
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods left in %s: %v: %w", ns, left, err)
	}
	return nil
}
