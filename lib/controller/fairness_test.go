// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import "testing"

func TestNamespaceShareParksBeyondTheLimitAndHandsBackInOrder(t *testing.T) {
	s := newNamespaceShare(2)
	for _, key := range []string{"a/1", "a/2"} {
		if !s.take(key) {
			t.Fatalf("take(%s) refused within the share", key)
		}
	}
	for _, key := range []string{"a/3", "a/4", "a/3"} { // a/3 again: parked once
		if s.take(key) {
			t.Fatalf("take(%s) allowed beyond the share", key)
		}
	}
	if !s.take("b/1") {
		t.Fatal("another namespace was refused a worker")
	}
	for _, want := range []string{"a/3", "a/4", ""} {
		if got := s.release("a/1"); got != want {
			t.Fatalf("release handed back %q, want %q", got, want)
		}
		if want != "" && !s.take(want) {
			t.Fatalf("take(%s) refused after its namespace released a worker", want)
		}
	}
}

func TestNamespaceWorkerLimitIsAllButOne(t *testing.T) {
	for threadiness, want := range map[int]int{1: 1, 2: 1, 8: 7} {
		if got := namespaceWorkerLimit(threadiness); got != want {
			t.Errorf("namespaceWorkerLimit(%d) = %d, want %d", threadiness, got, want)
		}
	}
}
