// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package workloop_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/workloop"
)

// The tests run in a synctest bubble: its clock moves only when every
// goroutine waits, so retries and resyncs need no real sleeps, and the
// bubble fails the test if any goroutine (a worker, the resync, the
// queue's own) is left once Run has returned.

// loop is one Run under test.
type loop struct {
	queue  workqueue.TypedRateLimitingInterface[string]
	ctx    context.Context
	logger klog.Logger
	cancel context.CancelFunc
	done   chan error
}

// start runs Run on a new queue with quick retries, logging to a buffer.
func start(t *testing.T, cfg workloop.Config[string]) *loop {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), logger))
	l := &loop{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "test"}),
		ctx: ctx, logger: logger, cancel: cancel, done: make(chan error, 1),
	}
	go func() { l.done <- workloop.Run(ctx, l.queue, cfg) }()
	return l
}

// stop ends ctx and checks that Run returns nil with the queue shut down.
func (l *loop) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	if err := <-l.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !l.queue.ShuttingDown() {
		t.Error("queue not shut down after Run returned")
	}
}

// loggedErrors returns the errors logged so far.
func (l *loop) loggedErrors() []ktesting.LogEntry {
	var out []ktesting.LogEntry
	for _, e := range l.logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if e.Type == ktesting.LogError {
			out = append(out, e)
		}
	}
	return out
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T)
	}{
		{"failed item is logged and retried until it succeeds, then forgotten", testRetry},
		{"workers sync items concurrently, up to Workers", testConcurrency},
		{"Resync is called every ResyncPeriod", testResync},
		{"ctx end waits for the item being synced and shuts the queue down", testStop},
	} {
		t.Run(tc.name, func(t *testing.T) { synctest.Test(t, tc.test) })
	}
}

func testRetry(t *testing.T) {
	var tries atomic.Int32
	l := start(t, workloop.Config[string]{
		ErrorMessage:  "Resize failed, will retry",
		KeysAndValues: func(key string) []any { return []any{"claim", key} },
		Sync: func(context.Context, string) error {
			if tries.Add(1) < 3 {
				return errors.New("boom")
			}
			return nil
		},
	})
	l.queue.Add("ns/a")
	time.Sleep(time.Second)
	synctest.Wait()
	if got := tries.Load(); got != 3 {
		t.Errorf("synced %d times, want 3 (2 failures, 1 success)", got)
	}
	if got := l.queue.NumRequeues("ns/a"); got != 0 {
		t.Errorf("NumRequeues after success = %d, want 0", got)
	}
	logged := l.loggedErrors()
	if len(logged) != 2 {
		t.Fatalf("logged %d errors, want 2: %v", len(logged), logged)
	}
	for _, e := range logged {
		if e.Message != "Resize failed, will retry" || e.Err == nil || e.Err.Error() != "boom" ||
			len(e.ParameterKVList) != 2 || e.ParameterKVList[0] != "claim" || e.ParameterKVList[1] != "ns/a" {
			t.Errorf("logged %q %v %v, want the message, the error and claim ns/a", e.Message, e.Err, e.ParameterKVList)
		}
	}
	l.stop(t)
}

func testConcurrency(t *testing.T) {
	const workers = 3
	var (
		mu                  sync.Mutex
		running, most, done int
	)
	release := make(chan struct{})
	l := start(t, workloop.Config[string]{
		Workers: workers,
		Sync: func(context.Context, string) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			done++
			mu.Unlock()
			return nil
		},
	})
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		l.queue.Add(key)
	}
	synctest.Wait()
	mu.Lock()
	if running != workers {
		t.Errorf("%d items synced at once with 5 queued, want %d", running, workers)
	}
	mu.Unlock()
	close(release)
	synctest.Wait()
	mu.Lock()
	if done != 5 || most != workers {
		t.Errorf("synced %d items, at most %d at once; want 5, at most %d", done, most, workers)
	}
	mu.Unlock()
	l.stop(t)
}

func testResync(t *testing.T) {
	var resyncs atomic.Int32
	l := start(t, workloop.Config[string]{
		Sync:         func(context.Context, string) error { return nil },
		ResyncPeriod: time.Minute,
		Resync:       func() { resyncs.Add(1) },
	})
	time.Sleep(3*time.Minute + time.Second)
	if got := resyncs.Load(); got != 3 {
		t.Errorf("Resync called %d times in 3 periods, want 3", got)
	}
	l.stop(t)
	time.Sleep(time.Hour)
	if got := resyncs.Load(); got != 3 {
		t.Errorf("Resync called %d times, want none after Run returned", got-3)
	}
}

func testStop(t *testing.T) {
	var finished atomic.Bool
	l := start(t, workloop.Config[string]{
		Workers: 2,
		Sync: func(ctx context.Context, _ string) error {
			<-ctx.Done()
			time.Sleep(time.Second) // still writing its result
			finished.Store(true)
			return nil
		},
		ResyncPeriod: time.Minute,
		Resync:       func() {},
	})
	l.queue.Add("a")
	synctest.Wait()
	l.stop(t)
	if !finished.Load() {
		t.Error("Run returned while an item was being synced")
	}
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	ok := func(context.Context, string) error { return nil }
	for _, tc := range []struct {
		name   string
		nilQ   bool
		config workloop.Config[string]
	}{
		{"nil queue", true, workloop.Config[string]{Sync: ok}},
		{"nil Sync", false, workloop.Config[string]{}},
		{"negative Workers", false, workloop.Config[string]{Sync: ok, Workers: -1}},
		{"negative ResyncPeriod", false, workloop.Config[string]{Sync: ok, ResyncPeriod: -time.Second, Resync: func() {}}},
		{"ResyncPeriod without Resync", false, workloop.Config[string]{Sync: ok, ResyncPeriod: time.Second}},
		{"Resync without ResyncPeriod", false, workloop.Config[string]{Sync: ok, Resync: func() {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
				defer queue.ShutDown()
				q := queue
				if tc.nilQ {
					q = nil
				}
				// ctx never ends: Run must return at once.
				if err := workloop.Run(t.Context(), q, tc.config); err == nil {
					t.Error("Run returned nil, want an error")
				}
				if queue.ShuttingDown() {
					t.Error("queue shut down by a Run that did not start")
				}
			})
		})
	}
}
