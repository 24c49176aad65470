// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package workloop works a rate-limited workqueue the way
// kubernetes/sample-controller does: workers take an item, sync it, and
// forget it on success or requeue it with the queue's rate limit on error,
// until the context ends. An optional resync queues items again on a timer,
// for state that informers do not report (a backend's free space).
//
// It is the loop of a small controller written once, so that each
// controller keeps only its sync. lib/controller has a loop of its own:
// it also shares workers fairly between namespaces and recovers panics.
package workloop

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// DefaultWorkers is the number of workers when Config.Workers is 0.
const DefaultWorkers = 1

// DefaultErrorMessage is the log message of a failed sync when
// Config.ErrorMessage is empty.
const DefaultErrorMessage = "Sync failed, will retry"

// Config says how Run works a queue.
type Config[T comparable] struct {
	// Workers is the number of items synced at once; 0 means DefaultWorkers.
	Workers int
	// Sync does the work of one item. An error is logged and the item
	// requeued with the queue's rate limit; nil forgets the item's failures.
	// The queue never hands one item to two workers at once.
	Sync func(ctx context.Context, item T) error
	// ErrorMessage is the message of the error logged when Sync fails, with
	// klog.FromContext(ctx); empty means DefaultErrorMessage.
	ErrorMessage string
	// KeysAndValues names the item in that log line, for example
	// []any{"claim", key}; nil logs "item", item.
	KeysAndValues func(item T) []any
	// ResyncPeriod, when positive, is how often Resync is called until ctx
	// ends; the first call is one period after Run starts.
	ResyncPeriod time.Duration
	// Resync is called every ResyncPeriod, usually to queue every item
	// again. It is needed if and only if ResyncPeriod is positive.
	Resync func()
}

// Run works queue with Config.Workers goroutines until ctx ends, calling
// Config.Sync for each item and Config.Resync every Config.ResyncPeriod.
// When ctx ends, Run shuts the queue down, waits for the workers to finish
// their items and the resync to stop, and returns nil. An invalid cfg is an
// error, returned before anything starts and with the queue left as it is.
func Run[T comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[T], cfg Config[T]) error {
	if err := cfg.check(queue); err != nil {
		return err
	}
	cfg.setDefaults()
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for cfg.processNextItem(ctx, queue) {
			}
		})
	}
	if cfg.ResyncPeriod > 0 {
		wg.Go(func() { resync(ctx, cfg.ResyncPeriod, cfg.Resync) })
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

func (cfg *Config[T]) check(queue workqueue.TypedRateLimitingInterface[T]) error {
	var errs []error
	if queue == nil {
		errs = append(errs, errors.New("workloop: queue is nil"))
	}
	if cfg.Sync == nil {
		errs = append(errs, errors.New("workloop: Sync is nil"))
	}
	if cfg.Workers < 0 || cfg.ResyncPeriod < 0 {
		errs = append(errs, errors.New("workloop: Workers and ResyncPeriod must not be negative"))
	}
	if (cfg.ResyncPeriod > 0) != (cfg.Resync != nil) {
		errs = append(errs, errors.New("workloop: Resync and a positive ResyncPeriod go together"))
	}
	return errors.Join(errs...)
}

func (cfg *Config[T]) setDefaults() {
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.ErrorMessage == "" {
		cfg.ErrorMessage = DefaultErrorMessage
	}
	if cfg.KeysAndValues == nil {
		cfg.KeysAndValues = func(item T) []any { return []any{"item", item} }
	}
}

// processNextItem syncs one item; false when the queue is shut down.
func (cfg *Config[T]) processNextItem(ctx context.Context, queue workqueue.TypedRateLimitingInterface[T]) bool {
	item, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(item)
	if err := cfg.Sync(ctx, item); err != nil {
		klog.FromContext(ctx).Error(err, cfg.ErrorMessage, cfg.KeysAndValues(item)...)
		queue.AddRateLimited(item)
		return true
	}
	queue.Forget(item)
	return true
}

// resync calls f every period until ctx ends.
func resync(ctx context.Context, period time.Duration, f func()) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			f()
		}
	}
}
