// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// operation is one provisioning that may have created an asset.
type operation struct {
	pvName   string
	claimKey string
	entry    journal.Entry
	started  time.Time
	// inBackground: the asset may still appear, so the operation lasts until
	// Provision says what became of it, even after its claim is gone.
	inBackground atomic.Bool
	// leaseChange, for an operation resumed from the journal, says how the
	// leader Lease shows that another identity held it since the entry was
	// written ("" when nothing shows that).
	leaseChange string
}

// operations are the in-flight provisionings, by PV name and by claim key
// (a claim deleted and created again under the same name has two).
type operations struct {
	mu       sync.Mutex
	byPV     map[string]*operation
	byClaim  map[string]sets.Set[string]
	inFlight prometheus.Gauge
}

func newOperations(inFlight prometheus.Gauge) *operations {
	return &operations{byPV: map[string]*operation{}, byClaim: map[string]sets.Set[string]{}, inFlight: inFlight}
}

// track returns the operation of pvName, starting one if there is none.
func (o *operations) track(pvName, claimKey string, e journal.Entry, inBackground bool) *operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	if op, ok := o.byPV[pvName]; ok {
		return op
	}
	op := &operation{pvName: pvName, claimKey: claimKey, entry: e, started: time.Now()}
	op.inBackground.Store(inBackground)
	o.byPV[pvName] = op
	if o.byClaim[claimKey] == nil {
		o.byClaim[claimKey] = sets.New[string]()
	}
	o.byClaim[claimKey].Insert(pvName)
	o.inFlight.Inc()
	return op
}

// end forgets the operation of pvName, if any.
func (o *operations) end(pvName string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	op, ok := o.byPV[pvName]
	if !ok {
		return
	}
	delete(o.byPV, pvName)
	if s := o.byClaim[op.claimKey]; s != nil {
		s.Delete(pvName)
		if s.Len() == 0 {
			delete(o.byClaim, op.claimKey)
		}
	}
	o.inFlight.Dec()
}

func (o *operations) get(pvName string) *operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byPV[pvName]
}

func (o *operations) hasClaim(claimKey string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byClaim[claimKey].Len() > 0
}

// forClaim returns the operations of a claim key.
func (o *operations) forClaim(claimKey string) []*operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	ops := make([]*operation, 0, o.byClaim[claimKey].Len())
	for name := range o.byClaim[claimKey] {
		ops = append(ops, o.byPV[name])
	}
	return ops
}

// operationsKey carries the controller's operations in an active task's
// context (InFlightClaims).
type operationsKey struct{}

// InFlightClaims returns, to a task started by WithActiveTask (ctx is its
// context or one derived from it), the claims of the provisioning operations
// in flight right now, each as it was when its operation began: those being
// provisioned, those whose asset may still appear (ProvisioningInBackground),
// and those resumed from the journal after a restart, also when the claim
// itself is gone. A provisioner uses it to know which of the things it holds
// for a claim (a finalizer on a data source) an operation may still need.
// Outside an active task it returns nil.
func InFlightClaims(ctx context.Context) []*corev1.PersistentVolumeClaim {
	o, ok := ctx.Value(operationsKey{}).(*operations)
	if !ok {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	claims := make([]*corev1.PersistentVolumeClaim, 0, len(o.byPV))
	for _, op := range o.byPV {
		claims = append(claims, op.entry.Claim)
	}
	return claims
}

// pendingSaves are provisioned PVs whose save failed and is retried in the
// background; the journal keeps their operations until they are saved.
type pendingSaves struct {
	mu  sync.Mutex
	pvs map[string]*corev1.PersistentVolume
}

func (s *pendingSaves) put(pv *corev1.PersistentVolume) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pvs == nil {
		s.pvs = map[string]*corev1.PersistentVolume{}
	}
	s.pvs[pv.Name] = pv
}

func (s *pendingSaves) get(pvName string) *corev1.PersistentVolume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pvs[pvName]
}

func (s *pendingSaves) remove(pvName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pvs, pvName)
}

// deletedVolumes are the UIDs of PVs this controller deleted, until the
// informer sees them go: acting on them again would only cost failing writes.
type deletedVolumes struct {
	mu   sync.Mutex
	uids sets.Set[types.UID]
}

func (d *deletedVolumes) add(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uids == nil {
		d.uids = sets.New[types.UID]()
	}
	d.uids.Insert(uid)
}

func (d *deletedVolumes) remove(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uids.Delete(uid)
}

func (d *deletedVolumes) has(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.uids.Has(uid)
}

// savedVolumeTTL bounds how long a saved PV's name is kept for the informer
// to see it: a PV deleted at once may never reach the cache.
const savedVolumeTTL = time.Minute

// savedVolumes are the names of PVs this controller saved, until the
// informer sees them: a claim synced in between (an update, a retry) finds
// its PV neither in the cache nor among the pending saves, and would be
// recorded and provisioned again, with a second ProvisioningSucceeded.
type savedVolumes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *savedVolumes) add(pvName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	s.at[pvName] = time.Now()
}

func (s *savedVolumes) remove(pvName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.at, pvName)
}

// has says whether pvName was saved less than savedVolumeTTL ago and the
// informer has not seen it since.
func (s *savedVolumes) has(pvName string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at[pvName]
	if ok && time.Since(at) >= savedVolumeTTL {
		delete(s.at, pvName)
		return false
	}
	return ok
}
