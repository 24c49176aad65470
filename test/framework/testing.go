// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"testing"
	"time"
)

// DefaultCleanupTimeout bounds each cleanup registered by the helpers below; the
// test's own context is already cancelled when cleanups run.
const DefaultCleanupTimeout = 30 * time.Second

// TestContext returns a context that ends after timeout or when the test ends,
// whichever comes first.
func TestContext(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// CreateTestNamespace creates a namespace for one test and deletes it (with
// DeleteNamespace) when the test ends. It fails the test if it cannot create it.
func (cp *ControlPlane) CreateTestNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := CreateNamespace(t.Context(), cp.Client, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCleanupTimeout)
		defer cancel()
		if err := DeleteNamespace(ctx, cp.Client, ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// StopAtEnd stops p when the test ends, failing the test if p did not exit
// cleanly (or crashed earlier), and shows the end of p's log if the test
// failed.
func StopAtEnd(t testing.TB, p *Process) {
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping %s: %v", p.Name, err)
		}
		if t.Failed() {
			t.Logf("log of %s (pid %d, %s), last lines:\n%s", p.Name, p.Pid(), p.LogPath, p.LogTail(60))
		}
	})
}
