// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// failureKey names the object whose failures are counted: by UID, so that a
// claim deleted and created again under the same name starts afresh.
type failureKey struct {
	kind objectKind
	uid  types.UID
}

type objectKind uint8

const (
	claimObject objectKind = iota + 1
	volumeObject
)

func claimFailures(claim *corev1.PersistentVolumeClaim) failureKey {
	return failureKey{kind: claimObject, uid: claim.UID}
}

func volumeFailures(pv *corev1.PersistentVolume) failureKey {
	return failureKey{kind: volumeObject, uid: pv.UID}
}

// failures counts failed attempts per object against a threshold. A count
// survives resyncs and is reset by a real change of the object (a new
// resourceVersion), so a user's fix re-arms the retries and a resync does not.
type failures struct {
	mu     sync.Mutex
	counts map[failureKey]failureCount
}

type failureCount struct {
	n               int // -1: given up until the object changes
	resourceVersion string
}

// record counts a failure and reports whether the threshold (0: none) is reached.
func (f *failures) record(key failureKey, resourceVersion string, threshold int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = map[failureKey]failureCount{}
	}
	c := f.counts[key]
	if c.resourceVersion != resourceVersion {
		c = failureCount{resourceVersion: resourceVersion}
	}
	c.n++
	f.counts[key] = c
	return threshold > 0 && c.n >= threshold
}

// giveUp stops retries of the object until it changes.
func (f *failures) giveUp(key failureKey, resourceVersion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = map[failureKey]failureCount{}
	}
	f.counts[key] = failureCount{n: -1, resourceVersion: resourceVersion}
}

// exhausted reports whether the object, unchanged, was given up.
func (f *failures) exhausted(key failureKey, resourceVersion string, threshold int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.counts[key]
	if !ok || c.resourceVersion != resourceVersion {
		return false
	}
	return c.n < 0 || (threshold > 0 && c.n >= threshold)
}

func (f *failures) reset(key failureKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.counts, key)
}
