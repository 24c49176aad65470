// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podruntest helps test code that runs pods with package podrun
// against a fake clientset, where no kubelet runs them.
package podruntest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Kubelet plays the kubelet until ctx ends: every pod created in ns gets
// the status that status returns for it. It returns the pods it saw, as
// created.
func Kubelet(ctx context.Context, t testing.TB, c kubernetes.Interface, ns string, status func(*corev1.Pod) corev1.PodStatus) <-chan *corev1.Pod {
	t.Helper()
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan *corev1.Pod, 10)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			// The fake clientset's watch may hand out the object it stores:
			// change a copy (the race detector saw readers of the original).
			pod = pod.DeepCopy()
			seen <- pod.DeepCopy()
			pod.Status = status(pod)
			if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("updating pod status: %v", err)
			}
		}
	}()
	return seen
}
