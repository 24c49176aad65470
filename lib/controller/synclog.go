// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// syncFailureRepeat is how often a failure that keeps repeating unchanged
// for one object is logged again at the default verbosity.
const syncFailureRepeat = time.Minute

// syncFailures logs every sync failure at the default verbosity: under
// back-pressure events are aggregated, so the log is the durable record of
// what failed. Rate-limited per object: a failure is logged when it is the
// object's first, when its message changes, and then once per
// syncFailureRepeat; the repeats in between go to -v=2.
type syncFailures struct {
	mu   sync.Mutex
	last map[string]loggedFailure // queue/key -> the last failure logged
	now  func() time.Time
}

type loggedFailure struct {
	message string
	at      time.Time
}

func newSyncFailures() *syncFailures {
	return &syncFailures{last: map[string]loggedFailure{}, now: time.Now}
}

// failed logs err for key of queue.
func (s *syncFailures) failed(ctx context.Context, queue, key string, err error) {
	logger := klog.FromContext(ctx).WithValues("queue", queue, "key", key)
	if s.record(queue+"/"+key, err.Error()) {
		logger.Error(err, "Sync failed; will retry")
		return
	}
	logger.V(2).Info("Sync failed again; will retry", "err", err)
}

func (s *syncFailures) record(id, message string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if last, ok := s.last[id]; ok && last.message == message && now.Sub(last.at) < syncFailureRepeat {
		return false
	}
	s.last[id] = loggedFailure{message: message, at: now}
	return true
}

// succeeded forgets key's failures: its next one is news again.
func (s *syncFailures) succeeded(queue, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, queue+"/"+key)
}

// unexpectedObject reports an informer event whose object is not of the
// handler's type: it is dropped, and says so.
func unexpectedObject(handler string, obj any) {
	klog.Background().Error(fmt.Errorf("unexpected object of type %T", obj), "Ignoring an informer event", "handler", handler)
}
