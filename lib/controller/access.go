// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// accessProbeInterval is how often a replica that lacks a permission checks
// again whether it was granted.
const accessProbeInterval = 30 * time.Second

// accessProblems remembers, for each object the controller needs (its
// journal, its Lease), a permission the API server refused. No retry fixes a
// missing permission, so while one is known the replica is not ready and the
// log says what is missing, at default verbosity, once per change.
type accessProblems struct {
	mu       sync.Mutex
	problems map[string]error
}

// observe records the outcome of a call on what: a refusal for lack of
// permission is a problem until a later call on what succeeds.
func (a *accessProblems) observe(ctx context.Context, what string, err error) {
	denied := apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
	if err != nil && !denied {
		return // says nothing about permissions
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old, had := a.problems[what]
	if !denied {
		delete(a.problems, what)
		if had {
			klog.FromContext(ctx).Info("Permission granted now", "object", what)
		}
		return
	}
	if a.problems == nil {
		a.problems = map[string]error{}
	}
	a.problems[what] = fmt.Errorf("cannot use %s: %w", what, err)
	if !had || old.Error() != a.problems[what].Error() {
		klog.FromContext(ctx).Error(err, "Permission missing: the provisioner cannot do its work until its RBAC grants it", "object", what)
	}
}

func (a *accessProblems) has(what string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.problems[what]
	return ok
}

// reason joins the known problems, in a stable order; nil when there are none.
func (a *accessProblems) reason() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.problems))
	for k := range a.problems {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		errs = append(errs, a.problems[k])
	}
	return errors.Join(errs...)
}

// probeJournalAccess reads the journal once at start, so that a standby
// replica that could never use it reports so before it is needed, and again
// while that read is refused.
func (c *ProvisionController) probeJournalAccess(ctx context.Context) {
	for c.probeJournal(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(accessProbeInterval):
		}
	}
}

// probeJournal reads the journal once and reports whether its permissions are missing.
func (c *ProvisionController) probeJournal(ctx context.Context) (denied bool) {
	_, err := c.client.CoreV1().ConfigMaps(c.journal.Namespace()).Get(ctx, c.journal.Name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	c.access.observe(ctx, c.journal.Describe(), err)
	return c.access.has(c.journal.Describe())
}

// observedLock reports the outcome of every Lease call to the controller's
// access problems: the leader elector only logs them.
// held, if set, gets every record written successfully: the terms this
// instance holds.
type observedLock struct {
	resourcelock.Interface
	observe func(error)
	held    func(resourcelock.LeaderElectionRecord)
}

func (l observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if apierrors.IsNotFound(err) {
		l.observe(nil)
	} else {
		l.observe(err)
	}
	return r, raw, err
}

func (l observedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.observe(err)
	if err == nil && l.held != nil {
		l.held(ler)
	}
	return err
}

func (l observedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.observe(err)
	if err == nil && l.held != nil {
		l.held(ler)
	}
	return err
}

// observeLease records the outcome of a Lease call. While the Lease is
// refused this instance can never lead, and no leader may exist to tell the
// claims: so it tells them itself, and says so in its log at default
// verbosity, at most once per accessProbeInterval (the recorder counts a
// repeated warning into the claim's earlier event). warned is when it last
// did; only the elector's goroutine calls this.
func (c *ProvisionController) observeLease(ctx context.Context, lease string, err error, warned *time.Time) {
	c.access.observe(ctx, lease, err)
	if !c.access.has(lease) || time.Since(*warned) < accessProbeInterval {
		return
	}
	*warned = time.Now()
	told := c.warnWaitingClaims(journalForbiddenMessage, lease)
	klog.FromContext(ctx).Error(err, "Cannot take the leader Lease for lack of permission: this instance will never lead until its RBAC grants it",
		"lease", lease, "waitingClaimsWarned", told)
}

// reportRefusedLists makes a list or watch the API server refuses, before
// the caches first sync, an access problem naming the resource: a replica
// whose RBAC lacks it (the library's rules never added, see
// journalForbiddenMessage) then says so in its readiness and log instead of
// only "informer caches not synced". The problems end when the caches sync;
// a refusal after that is client-go's to log and retry, as before.
func (c *ProvisionController) reportRefusedLists() {
	for resource, inf := range c.listedResources() {
		// Fails only for an informer already started (an injected factory):
		// it keeps client-go's handler.
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			select {
			case <-c.synced:
			default:
				if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
					c.access.observe(ctx, listProblem(resource), err)
				}
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
}

// listedResources are the resources the informers list, with their informer.
func (c *ProvisionController) listedResources() map[string]cache.SharedIndexInformer {
	m := map[string]cache.SharedIndexInformer{
		"persistentvolumeclaims":        c.claimInformer,
		"persistentvolumes":             c.volumeInformer,
		"storageclasses.storage.k8s.io": c.classInformer,
	}
	if c.nodeInformer != nil {
		m["nodes"] = c.nodeInformer
	}
	return m
}

// listProblem names what a refused informer needs, as an access problem.
func listProblem(resource string) string {
	return resource + " (list, watch; the ClusterRole labeled " + RBACRoleLabel + ": cluster gets them from lib/deploy/rbac)"
}

// listsSynced ends the problems reportRefusedLists recorded.
func (c *ProvisionController) listsSynced(ctx context.Context) {
	for resource := range c.listedResources() {
		if c.access.has(listProblem(resource)) {
			c.access.observe(ctx, listProblem(resource), nil)
		}
	}
}
