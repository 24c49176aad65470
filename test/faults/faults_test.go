// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kubeprov/external-storage/test/backend"
)

// fault is one case of the suite, run against every backend: a burst of
// claims, the fault injected while the burst is in flight, then the checks
// every case shares (see runCase).
type fault struct {
	name string
	// leaderElection runs two replicas competing for the Lease instead of one.
	leaderElection bool
	// inject breaks something; it runs once some of the burst's PVs exist
	// but not all.
	inject func(e *env) error
}

var faults = []fault{
	{name: "provisioner-killed", inject: killAndRestart},
	{name: "apiserver-restarted", inject: restartAPIServer},
	{name: "leader-killed", leaderElection: true, inject: killLeader},
	{name: "claims-deleted-while-provisioning", inject: deleteUnprovisioned},
	{name: "storage-outage", inject: storageOutage},
}

// sharedAcrossCases are the backends whose storage takes long to start
// (Cinder: RabbitMQ and three services, ~40 s): one instance, with one
// provisioner name, serves all their cases, each with a namespace and a
// class of its own. The others get an instance per case.
var sharedAcrossCases = map[string]bool{"cinder": true}

// TestFaults runs every fault against every backend: TestFaults/<backend>/<fault>.
func TestFaults(t *testing.T) {
	for _, name := range backends {
		t.Run(name, func(t *testing.T) {
			var shared *instance
			if sharedAcrossCases[name] {
				shared = newInstance(t, name)
			}
			for _, f := range faults {
				t.Run(f.name, func(t *testing.T) { runCase(t, name, shared, f) })
			}
		})
	}
}

// runCase sends a burst of claims, injects the fault while it is in flight
// and checks what a user and the storage administrator would see: every
// claim Bound (or failed with a Warning event), one PV per claim, one asset
// per PV; then, once every claim is deleted, no PV and no asset left.
func runCase(t *testing.T, backendName string, shared *instance, f fault) {
	e := newEnv(t, backendName, shared, f.leaderElection)
	e.createClaims(claims)
	created := e.waitInFlight()
	t.Logf("Injecting %s with %d of %d PVs created", f.name, created, claims)
	if err := f.inject(e); err != nil {
		t.Fatalf("injecting %s: %v", f.name, err)
	}
	injected := time.Now()
	e.settle()
	t.Logf("Burst settled %s after the fault ended", time.Since(injected).Round(time.Millisecond))
	e.checkDuplicates()
	e.checkAssets("after the burst")
	deleted := time.Now()
	e.deleteAllClaims()
	t.Logf("Claims, PVs and assets gone %s after the deletion", time.Since(deleted).Round(time.Millisecond))
}

// killAndRestart kills the only replica as a crash or an OOM kill would, in
// the middle of its operations, and starts it again: the new process must
// finish the burst from the journal without creating an asset twice.
func killAndRestart(e *env) error {
	old := e.replica("a")
	if err := old.Kill(); err != nil {
		return err
	}
	e.t.Logf("Killed replica a (pid %d)", old.Pid())
	_, err := e.startReplica("a")
	return err
}

// restartAPIServer takes kube-apiserver away for a few seconds; the
// provisioner's requests fail meanwhile and its watches break.
func restartAPIServer(e *env) error {
	return cp.RestartAPIServer(e.ctx)
}

// killLeader kills the leading replica; the standby must take over within
// the lease duration and finish the burst.
func killLeader(e *env) error {
	leader := e.leader()
	standby := e.standby(leader)
	if leader == nil || standby == nil {
		return fmt.Errorf("want a leader and a standby, have %v and %v", leader, standby)
	}
	if err := leader.Kill(); err != nil {
		return err
	}
	e.t.Logf("Killed the leader (pid %d)", leader.Pid())
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	return standby.WaitForLog(ctx, "Became leader")
}

// deleteUnprovisioned deletes every other claim that has no PV yet: the
// provisioner is creating its volume (or about to), and must neither leave
// the asset behind nor bind a PV to a claim that is gone.
func deleteUnprovisioned(e *env) error {
	withPV := e.claimsWithPV()
	var victims []string
	for i, name := range e.unprovisioned(withPV) {
		if i%2 == 0 {
			victims = append(victims, name)
		}
	}
	assets, err := e.b.Assets(e.ctx)
	if err != nil {
		return fmt.Errorf("listing the assets: %w", err)
	}
	e.t.Logf("Deleting %d claims without a PV (%d PVs and %d assets exist): %v", len(victims), len(withPV), len(assets), victims)
	for _, name := range victims {
		if err := e.deleteClaim(name); err != nil {
			return err
		}
	}
	return nil
}

// storageOutageHold bounds how long the storage stays away when the
// provisioner reports no failure (an operation that hangs instead).
const storageOutageHold = 10 * time.Second

// storageOutage takes the storage system away the way it fails in real life
// and brings it back once the provisioner has reported a failure, or after
// storageOutageHold.
func storageOutage(e *env) error {
	restore, err := e.b.Outage(e.ctx)
	if errors.Is(err, backend.ErrNoOutage) {
		e.t.Skipf("%s: %v", e.b.Name(), err)
	}
	if err != nil {
		return fmt.Errorf("starting the outage: %w", err)
	}
	e.t.Logf("Storage unavailable")
	if ev := e.waitForWarning(storageOutageHold); ev != nil {
		e.t.Logf("The provisioner noticed: %s %s on %s: %s", ev.Type, ev.Reason, ev.InvolvedObject.Name, ev.Message)
	} else {
		e.t.Logf("No warning within %s", storageOutageHold)
	}
	if err := restore(e.ctx); err != nil {
		return fmt.Errorf("restoring the storage: %w", err)
	}
	e.t.Logf("Storage back")
	return nil
}
