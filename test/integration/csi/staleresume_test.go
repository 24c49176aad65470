// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kubeprov/external-storage/csi/app"
	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/csidriver"
)

// TestJournalLeftBehindCreatesNothingAgain: ours is SIGKILLed in the middle
// of a burst of claims, an upstream-like provisioner takes the Lease over,
// provisions the rest and later deletes every volume; ours, started again,
// finds its journal entries of those claims and creates none of their
// volumes again. Entries with the volume ID are finished by a DeleteVolume
// of that ID (the volume is gone already: harmless); the others are left for
// an admin with a Warning event that says another identity held the Lease.
func TestJournalLeftBehindCreatesNothingAgain(t *testing.T) {
	e := newEnv(t, anyDriver, csidriver.Options{OperationDelay: 100 * time.Millisecond})
	class := e.createClass(nil)
	election := []string{"--leader-election", "--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"}
	e.prov = e.startProvisioner(election...)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	const burst = 50
	claims := make([]*corev1.PersistentVolumeClaim, burst)
	claimOf := map[string]*corev1.PersistentVolumeClaim{}
	for i := range claims {
		claims[i] = e.createClaim(class.Name, "1Gi")
		claimOf[pvName(claims[i])] = claims[i]
	}
	// Mid-burst: some PVs saved, some volumes being created, some claims
	// not begun.
	e.eventually("ours to save a third of the burst's PVs", func() bool { return e.savedPVs(claims) >= burst/3 })
	if err := e.prov.Kill(); err != nil {
		t.Fatal(err)
	}
	left := e.journalEntries()
	withID := 0
	for pv, entry := range left {
		if strings.Contains(entry, `"assetID":`) {
			withID++
		}
		if !strings.Contains(entry, `"lease":{"holder":`) {
			t.Errorf("journal entry %s records no Lease term: %s", pv, entry)
		}
	}
	if len(left) == 0 {
		t.Fatal("the kill left no journal entry: nothing to resume")
	}
	t.Logf("ours killed with %d journal entries, %d of them with the volume ID", len(left), withID)

	// The upstream-like provisioner takes over, serves every claim, and
	// deletes every volume once the claims are deleted.
	dial, err := connection.Dial(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dial.Close() })
	stopUpstream := e.runUpstream(app.UpstreamLeaseName(e.name), csispec.NewControllerClient(dial))
	for _, c := range claims {
		e.bound(c)
	}
	for _, c := range claims {
		if err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("upstream to delete every PV and volume", func() bool { return e.savedPVs(claims) == 0 && e.volumeCount() == 0 })
	stopUpstream()
	creates, deletes := len(e.driver.CreateRequests()), len(e.driver.DeleteRequests())

	// Ours again.
	e.prov = e.startProvisioner(election...)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	e.eventually("ours to finish or leave every entry", func() bool {
		now := e.journalEntries()
		for pv := range left {
			if _, still := now[pv]; still && !kept[pv] {
				if !hasEvent(e.ctx, claimOf[pv], "ProvisioningCleanupSkipped", "another identity held the leader Lease") {
					return false
				}
				kept[pv] = true
			}
		}
		return true
	})
	if n := len(e.driver.CreateRequests()) - creates; n != 0 {
		t.Errorf("ours made %d CreateVolume calls after its restart, for volumes upstream had already deleted; want none", n)
	}
	if n := len(e.driver.DeleteRequests()) - deletes; n != withID {
		t.Errorf("ours made %d DeleteVolume calls after its restart, want one per entry with a volume ID (%d)", n, withID)
	}
	if len(kept) != len(left)-withID {
		t.Errorf("%d entries left for an admin, want the %d without a volume ID", len(kept), len(left)-withID)
	}
	if withID > 0 && !e.prov.HasLog("deleting the asset by its recorded ID") {
		t.Error("ours' log does not say that it deleted by the recorded ID")
	}
	if e.savedPVs(claims) != 0 {
		t.Error("ours saved a PV for a deleted claim")
	}
	e.noVolumeLeft()
}

// savedPVs counts the PVs of claims that exist.
func (e *env) savedPVs(claims []*corev1.PersistentVolumeClaim) int {
	pvs, err := cp.Client.CoreV1().PersistentVolumes().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	names := map[string]bool{}
	for _, pv := range pvs.Items {
		names[pv.Name] = true
	}
	n := 0
	for _, c := range claims {
		if names[pvName(c)] {
			n++
		}
	}
	return n
}

// journalEntries are the entries of ours' in-flight journal, by PV name.
func (e *env) journalEntries() map[string]string {
	e.t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(journalNamespace).Get(e.ctx, controller.JournalName(e.name, ""), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range cm.Data {
		if !strings.HasPrefix(k, "_class.") {
			out[k] = v
		}
	}
	return out
}

// hasEvent reports whether an event about obj with the reason has a message
// containing every one of parts.
func hasEvent(ctx context.Context, obj metav1.Object, reason string, parts ...string) bool {
	list, err := cp.Client.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.UID == obj.GetUID() && ev.Reason == reason && containsAll(ev.Message, parts) {
			return true
		}
	}
	return false
}

// runUpstream runs, until the returned stop is called, a stand-in for the
// CSI external-provisioner of the env's driver: it competes for Lease
// leaseName with client-go's leader election, as the sidecar does, under
// identity upstreamLeaseHolder, and while it leads it creates the volume
// and PV of every claim of e.ns that waits for one, and deletes the volume
// and then the PV of every released PV of the driver.
func (e *env) runUpstream(leaseName string, driver csispec.ControllerClient) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: journalNamespace, Name: leaseName},
			Client:     cp.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: upstreamLeaseHolder},
		},
		LeaseDuration: upstreamLeaseSeconds * time.Second,
		RenewDeadline: 3 * time.Second,
		RetryPeriod:   500 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
					e.upstreamSync(ctx, driver)
					return false, nil
				})
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		elector.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// upstreamSync is one pass of the upstream stand-in; what fails is retried
// in the next.
func (e *env) upstreamSync(ctx context.Context, driver csispec.ControllerClient) {
	claims, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
			continue
		}
		if absent, err := pvAbsent(ctx, pvName(claim)); err == nil && absent {
			if _, err := e.createUpstreamVolume(ctx, driver, claim, "", ""); err != nil && ctx.Err() == nil {
				e.t.Logf("upstream stand-in: provisioning %s: %v", claim.Name, err)
			}
		}
	}
	pvs, err := cp.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Annotations[annProvisionedBy] != e.name || pv.Status.Phase != corev1.VolumeReleased || pv.Spec.CSI == nil {
			continue
		}
		if _, err := driver.DeleteVolume(ctx, &csispec.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
			continue
		}
		pv.Finalizers = nil
		if _, err := cp.Client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			continue
		}
		_ = cp.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	}
}
