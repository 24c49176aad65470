// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// namespaceShare caps the claim workers one namespace holds at once, so that
// a namespace whose Provision calls block (a slow backend, up to the
// operation timeout) always leaves a worker to the others. A key over its
// namespace's share is parked, without counting as a failure, and queued
// again when one of its namespace's workers is released: no polling, no
// event, and the queue's order between namespaces is kept.
type namespaceShare struct {
	limit int

	mu     sync.Mutex
	held   map[string]int
	parked map[string][]string // by namespace, oldest first
	isPark sets.Set[string]
}

func newNamespaceShare(limit int) *namespaceShare {
	return &namespaceShare{limit: limit, held: map[string]int{}, parked: map[string][]string{}, isPark: sets.New[string]()}
}

// namespaceWorkerLimit is the share of a namespace: all claim workers but
// one (with one worker, that one).
func namespaceWorkerLimit(threadiness int) int {
	return max(1, threadiness-1)
}

// take gives key's namespace one more worker, or parks key and returns false.
func (s *namespaceShare) take(key string) bool {
	ns := keyNamespace(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[ns] < s.limit {
		s.held[ns]++
		return true
	}
	if !s.isPark.Has(key) {
		s.isPark.Insert(key)
		s.parked[ns] = append(s.parked[ns], key)
	}
	return false
}

// release returns the worker key held and the key of its namespace parked
// longest, to be queued again ("" if none).
func (s *namespaceShare) release(key string) (next string) {
	ns := keyNamespace(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[ns]--; s.held[ns] <= 0 {
		delete(s.held, ns)
	}
	waiting := s.parked[ns]
	if len(waiting) == 0 {
		return ""
	}
	next = waiting[0]
	if len(waiting) == 1 {
		delete(s.parked, ns)
	} else {
		s.parked[ns] = waiting[1:]
	}
	s.isPark.Delete(next)
	return next
}

// keyNamespace is the namespace of a "namespace/name" queue key.
func keyNamespace(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}
