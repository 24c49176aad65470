// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package kubeletsim

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"
)

// StartForTest runs a simulator against cfg's API server, with its
// directories under t's temporary directory, until t ends; a run that ends
// in error fails t.
func StartForTest(t testing.TB, cfg *rest.Config, images map[string]Image) *Sim {
	t.Helper()
	sim, err := New(cfg, t.TempDir(), images)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubeletsim: %v", err)
		}
	})
	return sim
}
