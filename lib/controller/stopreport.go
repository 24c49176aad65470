// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// runningCalls knows the Provision and Delete calls running now: a stop
// waits for them, and when one ignores its canceled context the stop would
// otherwise wait in silence until the kubelet kills the process.
type runningCalls struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]*runningCall
}

type runningCall struct {
	operation string // "provision" or "delete"
	object    string // the claim (namespace/name) or the PV
	started   time.Time
	overdue   bool // already counted as running past a stop's grace period
}

// begin records a call of operation about object; end must be called when it returns.
func (r *runningCalls) begin(operation, object string) (end func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[uint64]*runningCall{}
	}
	r.next++
	id := r.next
	r.calls[id] = &runningCall{operation: operation, object: object, started: time.Now()}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.calls, id)
	}
}

// markOverdue returns the calls running now, oldest first, each with overdue
// as it was (false: not returned by an earlier markOverdue), and marks them.
func (r *runningCalls) markOverdue() []runningCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := make([]runningCall, 0, len(r.calls))
	for _, c := range r.calls {
		calls = append(calls, *c)
		c.overdue = true
	}
	slices.SortFunc(calls, func(a, b runningCall) int { return a.started.Compare(b.started) })
	return calls
}

// reportSlowStop starts watching a stop that began now: every stop grace
// period (WithStopGracePeriod) until the returned function is called, it
// logs, at default verbosity, each Provision or Delete call still running,
// and counts each once in controller_stop_overdue_calls_total. Their
// contexts were canceled when the stop began; a call still running then
// ignores its context.
func (c *ProvisionController) reportSlowStop(logger klog.Logger) (stopped func()) {
	begun := time.Now()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(c.cfg.stopGracePeriod)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, call := range c.calls.markOverdue() {
				if !call.overdue {
					c.metrics.stopOverdue.WithLabelValues(call.operation).Inc()
				}
				logger.Error(nil, "Stopping waits for a call that ignores its canceled context: Provision and Delete must return when their context ends",
					"operation", call.operation, "object", call.object,
					"running", time.Since(call.started).Round(time.Second), "stopping", time.Since(begun).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
