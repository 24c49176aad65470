// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podrun runs one short-lived pod per operation and reads its
// result, for provisioners that do their work in pods (a driver image, a
// helper on the volume's node).
//
// A Runner creates the operation's pod under a deterministic name, or takes
// the pod an earlier attempt left if it is exactly the pod it would create
// (SameIntent), watches it until it ends (Wait), and deletes that very pod
// once its result is read (Delete). The caller builds the pod, bounds the
// wait and reads the result: the container's final state (Terminated), or
// why it never started (NeverStarted, WhyNotStarted).
package podrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
)

const (
	// maxNameLength keeps pod names usable as host names and label values.
	maxNameLength = 63
	// MaxMessageBytes bounds each piece of a pod's text (termination
	// message, status message) quoted in an error, so that events stay
	// readable.
	MaxMessageBytes = 512
	// deleteTimeout bounds the deletion of a finished pod.
	deleteTimeout = 30 * time.Second
)

var (
	// ErrForeignPod: a pod of the operation's name exists but is not the
	// pod the caller would create. It is neither used nor deleted: anyone
	// who can create pods in the namespace can plant one, and its
	// termination message must not decide what a provisioner believes.
	ErrForeignPod = errors.New("a pod of that name exists but is not the one this provisioner creates")
	// ErrPodGone: the pod was deleted (or replaced by another of its name)
	// before it ended.
	ErrPodGone = errors.New("pod gone")
)

// Runner creates, watches and deletes operation pods.
type Runner struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// DeleteGracePeriod is the grace period Delete asks for; nil means the
	// pod's own.
	DeleteGracePeriod *int64
}

// Start creates want or, if a pod of its name exists, returns that pod when
// same(existing, want) says it is the one want describes (an earlier
// attempt's), so that an operation never has two pods. Otherwise the error
// wraps ErrForeignPod. Other errors are the API server's.
func (r Runner) Start(ctx context.Context, want *corev1.Pod, same func(existing, want *corev1.Pod) bool) (*corev1.Pod, error) {
	pods := r.Client.CoreV1().Pods(want.Namespace)
	pod, err := pods.Create(ctx, want, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return pod, err
	}
	pod, err = pods.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !same(pod, want) {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrForeignPod)
	}
	klog.FromContext(ctx).V(2).Info("Waiting on the existing pod of an earlier attempt", "pod", klog.KObj(pod))
	return pod, nil
}

// Wait watches pod until it succeeds or fails, and returns it then. It
// returns ErrPodGone when the pod is deleted or replaced first, and the
// context's error when ctx ends or bound passes.
func (r Runner) Wait(ctx context.Context, pod *corev1.Pod, bound time.Time) (*corev1.Pod, error) {
	ctx, cancel := context.WithDeadline(ctx, bound)
	defer cancel()
	pods := r.Client.CoreV1().Pods(pod.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	// The wrapper tells the reflector whether the client can stream lists
	// (fake clients cannot).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}, r.Client)
	present := func(store cache.Store) (bool, error) {
		obj, ok, err := store.GetByKey(pod.Namespace + "/" + pod.Name)
		if err != nil || !ok {
			return false, ErrPodGone
		}
		p, ok := obj.(*corev1.Pod)
		return ok && p.UID == pod.UID && Terminal(p), nil
	}
	var last *corev1.Pod
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, present, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, ErrPodGone
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if p.UID != pod.UID {
			return false, ErrPodGone
		}
		last = p
		return Terminal(p), nil
	})
	if err != nil {
		return nil, err
	}
	if ev == nil {
		// Already terminal when the watch started (present).
		if last != nil {
			return last, nil
		}
		return pods.Get(ctx, pod.Name, metav1.GetOptions{})
	}
	return ev.Object.(*corev1.Pod), nil
}

// Delete deletes this very pod (by UID), even when ctx has ended: its
// result is read, or it is given up. A failure is logged; the next attempt
// finds the pod, reads its result and deletes it.
func (r Runner) Delete(ctx context.Context, pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	uid := pod.UID
	err := r.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: r.DeleteGracePeriod,
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "Deleting finished pod failed; the next attempt reads its result and deletes it", "pod", klog.KObj(pod))
	}
}

// ShortName keeps names of up to maxNameLength characters and otherwise
// cuts them, ending with a hash of the whole name so that they stay
// distinct.
func ShortName(s string) string {
	if len(s) <= maxNameLength {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(s[:maxNameLength-len(h)-1], "-.") + "-" + h
}

// LabelValue makes a name (of a PV, say) usable as a label value.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return ShortName(s)
}

// Terminal reports whether pod succeeded or failed.
func Terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// Terminated is the final state of pod's container named container, if any.
func Terminated(pod *corev1.Pod, container string) *corev1.ContainerStateTerminated {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			return cs.State.Terminated
		}
	}
	return nil
}

// NeverStarted reports whether no container of pod ever started, whatever
// its phase.
func NeverStarted(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return false
		}
	}
	return true
}

// NeverRan reports whether pod is pending and no container of it ever
// started.
func NeverRan(pod *corev1.Pod) bool {
	// A pod nobody has reported on yet has no phase: it is pending too.
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return false
	}
	return NeverStarted(pod)
}

// WhyNotStarted says what kept a pod from starting, as the scheduler or the
// kubelet (or, for a node that does not exist, nobody) reported it.
func WhyNotStarted(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("not scheduled: %s %s", c.Reason, Truncate(c.Message))
		}
	}
	node := pod.Spec.NodeName
	if node == "" {
		return fmt.Sprintf("not scheduled to any node (node-selector %v)", labels.Set(pod.Spec.NodeSelector))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return fmt.Sprintf("on node %s, container is waiting: %s %s", node, w.Reason, Truncate(w.Message))
		}
	}
	if pod.Status.Phase == "" && len(pod.Status.Conditions) == 0 {
		return fmt.Sprintf("no kubelet has reported on it: is node %s up?", node)
	}
	return fmt.Sprintf("on node %s, container has not started", node)
}

// Truncate trims s and shortens it to MaxMessageBytes on a rune boundary.
func Truncate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...(truncated)"
}
