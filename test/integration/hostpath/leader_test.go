// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/framework"
)

// TestLeaderElectionFailover runs two replicas of the Deployment mode with
// --leader-election on one node and sends a burst of claims. The leader is
// killed (SIGKILL, no chance to hand over) while provisioning; the standby
// takes over, finishes the burst from the journal and deletes it all again.
// Every claim is provisioned exactly once: directories == PVs == claims.
func TestLeaderElectionFailover(t *testing.T) {
	const claims = 30
	ctx := framework.TestContext(t, 3*time.Minute)
	e := setup(t, "leader", nil)
	args := e.args(node, "--leader-election",
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
		"--kube-api-qps=100", "--kube-api-burst=200")
	replicas := []*framework.Process{startProvisioner(t, e.env(), args...), startProvisioner(t, e.env(), args...)}
	leader := waitForLeader(ctx, t, replicas)
	standby := replicas[1-slices.Index(replicas, leader)]

	var names []string
	for i := range claims {
		names = append(names, fmt.Sprintf("claim-%02d", i))
		e.createPVC(t, names[i], nil)
	}
	// Kill the leader as soon as it has provisioned something, so that other
	// operations are in flight.
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return len(volumesOfClass(ctx, t, e.class.Name)) > 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader (pid %d) with %d of %d PVs created", leader.Pid(), len(volumesOfClass(ctx, t, e.class.Name)), claims)
	if err := standby.WaitForLog(ctx, "Became leader"); err != nil {
		t.Fatal(err)
	}

	for _, name := range names {
		bound(ctx, t, e.ns, name)
	}
	pvs := volumesOfClass(ctx, t, e.class.Name)
	pvNames := sets.New[string]()
	claimUIDs := sets.New[string]()
	for _, pv := range pvs {
		pvNames.Insert(pv.Name)
		claimUIDs.Insert(string(pv.Spec.ClaimRef.UID))
	}
	dirs := sets.New(entries(t, e.pvDir)...)
	if len(pvs) != claims || claimUIDs.Len() != claims || !dirs.Equal(pvNames) {
		t.Fatalf("%d claims, %d PVs for %d distinct claims, directories %v; want one PV and one directory per claim (extra directories: %v)",
			claims, len(pvs), claimUIDs.Len(), dirs.Len(), sets.List(dirs.Difference(pvNames)))
	}

	for _, name := range names {
		deletePVC(t, e.ns, name)
	}
	for _, pv := range pvs {
		if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, e.pvDir); len(got) != 0 {
		t.Errorf("--pv-dir holds %d directories after every PV was deleted: %v", len(got), got)
	}
}

// waitForLeader returns the replica that logged that it became leader.
func waitForLeader(ctx context.Context, t *testing.T, replicas []*framework.Process) *framework.Process {
	t.Helper()
	var leader *framework.Process
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, p := range replicas {
			if p.HasLog("Became leader") {
				leader = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no replica became leader: %v", err)
	}
	return leader
}
