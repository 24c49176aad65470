// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

// snapshotProtection is upstream's finalizer on a VolumeSnapshot a volume
// is being restored from.
const snapshotProtection = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"

// snapshotState is "gone", or "protected" / "unprotected" (with our
// finalizer or without), with " deleting" when it has a deletion timestamp.
func (e *env) snapshotState(dyn dynamic.Interface, name string) string {
	e.t.Helper()
	snap, err := dyn.Resource(snapshotResource).Namespace(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "gone"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	state := "unprotected"
	if slices.Contains(snap.GetFinalizers(), snapshotProtection) {
		state = "protected"
	}
	if snap.GetDeletionTimestamp() != nil {
		state += " deleting"
	}
	return state
}

// expectSnapshot waits until the snapshot's state is want.
func (e *env) expectSnapshot(dyn dynamic.Interface, name, want string) {
	e.t.Helper()
	var got string
	e.eventually("VolumeSnapshot "+name+" "+want, func() bool {
		got = e.snapshotState(dyn, name)
		return got == want
	})
}

// TestSnapshotProtection: a VolumeSnapshot carries upstream's protection
// finalizer exactly while a volume may be being restored from it. Deleted
// during a restore that timed out, it stays until the restore is finished
// and the volume made for the deleted claim is deleted: nothing leaks. The
// finalizer goes when the restore ends: bound, or failed for good. At start
// the provisioner removes it from snapshots no restore in flight needs, and
// keeps it on the snapshot of a restore it resumes from its journal, and
// on another CSI driver's snapshot (its content's spec.driver). All
// with exactly the deploy's RBAC.
func TestSnapshotProtection(t *testing.T) {
	e := newEnv(t, inProcessDriver, csidriver.Options{})
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	e.installSnapshotCRDs(dyn)
	user, home, kubeconfig := e.deployUser()
	start := func(args ...string) *framework.Process {
		p := e.startReplica(backend.Replica{Args: append([]string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + home,
			"--timeout=2s", "--retry-interval-max=2s"}, args...)})
		if err := p.WaitReady(e.ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e.prov = start()
	class := e.createClass(nil)
	for _, name := range []string{"snap", "bound", "failing", "swept", "resumed"} {
		handle := "handle-" + name
		if err := e.inProcess.AddSnapshot(handle, 1<<30); err != nil {
			t.Fatal(err)
		}
		e.createSnapshot(dyn, name, handle, true)
	}
	deleteSnapshot := func(t *testing.T, name string) {
		t.Helper()
		if err := dyn.Resource(snapshotResource).Namespace(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// hold makes the next CreateVolume outlast the provisioner's timeout
	// until release, then complete: a backend that finishes what its
	// client gave up on. waitStarted returns once the call has arrived.
	hold := func(t *testing.T) (waitStarted, release func()) {
		t.Helper()
		started, released := make(chan struct{}), make(chan struct{})
		e.inProcess.FailCreate(csidriver.Fault{Started: started, Release: released})
		var once sync.Once
		release = func() { once.Do(func() { close(released) }) }
		t.Cleanup(release)
		return func() {
			select {
			case <-started:
			case <-e.ctx.Done():
				t.Fatal("CreateVolume was never called")
			}
		}, release
	}

	t.Run("snapshot deleted during a restore that timed out", func(t *testing.T) {
		e := e.on(t)
		waitStarted, release := hold(t)
		claim := e.createClaim(class.Name, "1Gi", restoreFrom("snap"))
		waitStarted()
		if got := e.snapshotState(dyn, "snap"); got != "protected" {
			t.Errorf("VolumeSnapshot while CreateVolume restores from it: %s, want protected", got)
		}
		e.event(claim, "ProvisioningFailed", "still in progress, will retry")
		e.deleteClaim(claim)
		deleteSnapshot(t, "snap")
		if got := e.snapshotState(dyn, "snap"); got != "protected deleting" {
			t.Fatalf("VolumeSnapshot deleted while a restore from it may still complete: %s, want protected deleting", got)
		}
		// The driver completes the restore it was asked for: the volume
		// of the deleted claim is deleted, then the snapshot is let go.
		release()
		e.expectSnapshot(dyn, "snap", "gone")
		e.noVolumeLeft()
		if _, err := cp.Client.CoreV1().PersistentVolumes().Get(e.ctx, pvName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("PV of the deleted claim: %v, want none", err)
		}
	})

	t.Run("restore bound: the snapshot is let go", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(class.Name, "1Gi", restoreFrom("bound")))
		e.expectSnapshot(dyn, "bound", "unprotected")
		e.deleteClaim(claim)
		e.pvGone(pv.Name)
	})

	t.Run("restore failed for good: the snapshot can be deleted", func(t *testing.T) {
		e := e.on(t)
		for range 100 {
			e.inProcess.FailCreate(csidriver.Fault{Code: codes.InvalidArgument, Message: "no restore today"})
		}
		claim := e.createClaim(class.Name, "1Gi", restoreFrom("failing"))
		e.event(claim, "ProvisioningFailed", "no restore today")
		deleteSnapshot(t, "failing")
		e.expectSnapshot(dyn, "failing", "gone")
		e.event(claim, "ProvisioningFailed", "VolumeSnapshot "+e.ns+"/failing")
		e.deleteClaim(claim)
		e.noVolumeLeft()
	})
	e.inProcess.ClearCreateFaults()

	t.Run("at start: orphaned finalizers removed, a resumed restore's kept", func(t *testing.T) {
		e := e.on(t)
		// As another sidecar, or a stop at the wrong moment, leaves it.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": []string{snapshotProtection}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(snapshotResource).Namespace(e.ns).Patch(e.ctx, "swept", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// Another driver's snapshot, which that driver's sidecar protects
		// while it restores from it (issue 36 case 5): not ours to let go.
		e.createSnapshotOf(dyn, "other.csi.example.com", "other-driver", "handle-other", true)
		if _, err := dyn.Resource(snapshotResource).Namespace(e.ns).Patch(e.ctx, "other-driver", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			unprotect := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := dyn.Resource(snapshotResource).Namespace(e.ns).Patch(e.ctx, "other-driver", types.MergePatchType, unprotect, metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}()
		// A restore under way when the provisioner stops, whose claim and
		// snapshot are deleted while it is down.
		waitStarted, release := hold(t)
		claim := e.createClaim(class.Name, "1Gi", restoreFrom("resumed"))
		waitStarted()
		if err := e.prov.Stop(); err != nil {
			t.Fatal(err)
		}
		e.deleteClaim(claim)
		deleteSnapshot(t, "resumed")
		// Sweeps every second; the resumed restore, answered Aborted while
		// the driver still holds the first call, is asked again only after
		// 5 s: sweeps meet it in flight but not being provisioned.
		e.prov = start("--snapshot-orphan-sweep-interval=1s", "--retry-interval-start=5s", "--retry-interval-max=5s")
		e.expectSnapshot(dyn, "swept", "unprotected")
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if got := e.snapshotState(dyn, "resumed"); got != "protected deleting" {
				t.Fatalf("snapshot of a restore resumed after the restart: %s, want protected deleting", got)
			}
			if got := e.snapshotState(dyn, "other-driver"); got != "protected" {
				t.Fatalf("another CSI driver's snapshot, protected by its own sidecar: %s, want protected", got)
			}
		}
		release()
		e.expectSnapshot(dyn, "resumed", "gone")
		e.noVolumeLeft()
	})

	if err := e.prov.Stop(); err != nil {
		t.Error(err)
	}
	cp.ExpectNoForbidden(t, user)
}
