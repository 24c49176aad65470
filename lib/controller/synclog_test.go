// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// defaultVerbosityLog is a context whose logger keeps what an operator sees
// without -v: verbosity 0.
func defaultVerbosityLog(t *testing.T, ctx context.Context) (context.Context, func() string) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()
	return klog.NewContext(ctx, logger), buffer.String
}

// A worker logs a sync failure at the default verbosity with the object and
// the error; the same failure again soon after only at -v=2; a new error,
// or the same one after a success, is news again.
func TestSyncFailuresAreLoggedAtDefaultVerbosity(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	ctx, logged := defaultVerbosityLog(t, f.ctx)
	q := f.c.claimQueue
	results := []error{
		errors.New("quota exceeded"), errors.New("quota exceeded"), errors.New("quota exceeded"),
		errors.New("backend unreachable"), nil, errors.New("backend unreachable"),
	}
	q.Add("apps/data")
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.work(ctx, "claims", q, func(context.Context, string) error {
			err := results[0]
			results = results[1:]
			if len(results) == 0 {
				q.ShutDown()
			} else if err == nil {
				q.Add("apps/data") // a success ends the retries; the next change comes as an event
			}
			return err
		}, nil)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not get through the scripted syncs")
	}
	out := logged()
	failures := strings.Count(out, "Sync failed; will retry")
	if failures != 3 || strings.Count(out, "quota exceeded") != 1 || strings.Count(out, "backend unreachable") != 2 {
		t.Fatalf("logged at the default verbosity %d failures, want 3: quota exceeded once (then only at -v=2), backend unreachable twice (new, and again after a success):\n%s", failures, out)
	}
	if !strings.Contains(out, `key="apps/data"`) || !strings.Contains(out, `queue="claims"`) {
		t.Errorf("the failure log does not name the object and its queue:\n%s", out)
	}
}

// An unchanged failure is logged again once syncFailureRepeat has passed.
func TestRepeatedSyncFailureIsLoggedAgainAfterAWhile(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := newSyncFailures()
	s.now = func() time.Time { return now }
	for i, step := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {time.Second, false}, {syncFailureRepeat - 2*time.Second, false}, {2 * time.Second, true}, {time.Second, false}} {
		now = now.Add(step.after)
		if got := s.record("claims/apps/data", "quota exceeded"); got != step.want {
			t.Errorf("step %d (+%s): logged %v, want %v", i, step.after, got, step.want)
		}
	}
}

// A malformed queue key is dropped and said, not dropped silently.
func TestMalformedClaimKeyIsLogged(t *testing.T) {
	f := newFixture(t, newStore(t), nil)
	ctx, logged := defaultVerbosityLog(t, f.ctx)
	if err := f.c.syncClaim(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if out := logged(); !strings.Contains(out, "Dropping a malformed claim key") || !strings.Contains(out, `key="a/b/c"`) {
		t.Fatalf("nothing logged for a malformed key:\n%s", out)
	}
}
