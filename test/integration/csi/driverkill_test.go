// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

// killOperationDelay is how long each CreateVolume and DeleteVolume of the
// killed driver takes between its two steps on disk: long enough for the
// kill to land inside calls under way, whatever the machine's load.
const killOperationDelay = time.Second

// TestDriverKilled: the driver process is killed (SIGKILL) while claims
// are being provisioned and deleted, with calls half done on its disk, and
// started again on its state. The provisioner retries what the kill cut
// short. In the end every claim is bound to a volume the driver holds, the
// volume of every deleted claim is gone from the driver's state and disk,
// no volume directory is left without its volume, and no PV of the class is
// Released or Terminating.
func TestDriverKilled(t *testing.T) {
	e := setup(t, processDriver, csidriver.Options{OperationDelay: killOperationDelay})
	class := e.createClass(nil)
	files := e.view().(driverFiles)

	// Bound before the kill; half of them are deleted around it.
	var kept, deleted []*corev1.PersistentVolumeClaim
	var deletedPVs []*corev1.PersistentVolume
	var early []*corev1.PersistentVolumeClaim
	for range 6 {
		early = append(early, e.createClaim(class.Name, "1Gi"))
	}
	for i, claim := range early {
		claim, pv := e.bound(claim)
		if i%2 == 0 {
			kept = append(kept, claim)
			continue
		}
		deleted, deletedPVs = append(deleted, claim), append(deletedPVs, pv)
	}

	// New claims and deletions at once; the driver dies once both kinds of
	// call have reached it, inside killOperationDelay.
	before := files.requests()
	for _, claim := range deleted {
		if err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var late []*corev1.PersistentVolumeClaim
	for range 6 {
		late = append(late, e.createClaim(class.Name, "1Gi"))
	}
	e.eventually("CreateVolume and DeleteVolume calls of the new and deleted claims", func() bool {
		r := files.requests()
		return len(r.Create) > len(before.Create) && len(r.Delete) > len(before.Delete)
	})
	killed := e.backend.DriverProcess()
	restore, err := e.backend.Outage(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	atKill := files.requests()
	t.Logf("Killed the driver (pid %d) after %d CreateVolume and %d DeleteVolume calls", killed.Pid(), len(atKill.Create), len(atKill.Delete))
	if err := waitNotReady(e.ctx, e.prov); err != nil {
		t.Fatal(err)
	}
	if err := restore(e.ctx); err != nil {
		t.Fatal(err)
	}

	// Every claim bound; every deleted claim's PV and volume gone.
	for _, claim := range slices.Concat(kept, late) {
		e.bound(claim)
	}
	for i, claim := range deleted {
		if err := framework.WaitForPVCDeleted(e.ctx, cp.Client, claim.Namespace, claim.Name); err != nil {
			t.Fatal(err)
		}
		e.pvGone(deletedPVs[i].Name)
	}
	for _, pv := range deletedPVs {
		id := pv.Spec.CSI.VolumeHandle
		if slices.ContainsFunc(files.Volumes(), func(v csidriver.Volume) bool { return v.ID == id }) {
			t.Errorf("the volume %s of deleted PV %s is still in the driver's state", id, pv.Name)
		}
		if _, err := os.Stat(filepath.Join(e.stateDir, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the directory of the volume %s of deleted PV %s is still on the driver's disk (%v)", id, pv.Name, err)
		}
	}
	// The driver holds exactly the PVs' volumes, each with its directory.
	if err := backend.WaitForAssets(e.ctx, e.backend, cp.Client, class.Name); err != nil {
		t.Error(err)
	}
	if err := csidriver.CheckStateDir(e.stateDir); err != nil {
		t.Error(err)
	}
	if n := len(files.Volumes()); n != len(kept)+len(late) {
		t.Errorf("the driver holds %d volumes, want %d", n, len(kept)+len(late))
	}
	pvs, err := cp.Client.CoreV1().PersistentVolumes().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName == class.Name && (pv.Status.Phase != corev1.VolumeBound || pv.DeletionTimestamp != nil) {
			t.Errorf("PV %s is %s (deletion timestamp %v), want Bound", pv.Name, pv.Status.Phase, pv.DeletionTimestamp)
		}
	}

	// The kill did cut calls short: the provisioner retried some of each
	// against the restarted driver, which removed what they had left on
	// its disk.
	after := files.requests()
	if err := retried(atKill, after); err != nil {
		t.Error(err)
	}
	p := e.backend.DriverProcess()
	if n := strings.Count(p.Log(), "Removed the directory of"); n == 0 {
		t.Errorf("the restarted driver removed no directory left by calls the kill cut short; log %s:\n%s", p.LogPath, p.LogTail(20))
	} else {
		t.Logf("The restarted driver removed %d directories of calls the kill cut short; %d CreateVolume and %d DeleteVolume calls in all",
			n, len(after.Create), len(after.Delete))
	}

	for _, claim := range slices.Concat(kept, late) {
		e.deleteClaim(claim)
	}
	e.noVolumeLeft()
}

// retried checks that a CreateVolume name and a DeleteVolume volume id that
// reached the driver before the kill (atKill) reached it again after.
func retried(atKill, after *csidriver.Requests) error {
	var errs []error
	creates := map[string]bool{}
	for _, r := range atKill.Create {
		creates[r.GetName()] = true
	}
	if !slices.ContainsFunc(after.Create[len(atKill.Create):], func(r *csi.CreateVolumeRequest) bool { return creates[r.GetName()] }) {
		errs = append(errs, fmt.Errorf("no CreateVolume under way at the kill was retried"))
	}
	deletes := map[string]bool{}
	for _, r := range atKill.Delete {
		deletes[r.GetVolumeId()] = true
	}
	if !slices.ContainsFunc(after.Delete[len(atKill.Delete):], func(r *csi.DeleteVolumeRequest) bool { return deletes[r.GetVolumeId()] }) {
		errs = append(errs, fmt.Errorf("no DeleteVolume under way at the kill was retried"))
	}
	return errors.Join(errs...)
}
