// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"k8s.io/apimachinery/pkg/util/wait"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	cinderbackend "github.com/kubeprov/external-storage/test/backend/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

// volumesOf lists the Cinder volumes whose metadata names identity.
func volumesOf(ctx context.Context, identity string) ([]volumes.Volume, error) {
	vols, err := cinderAPI.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(vols, func(v volumes.Volume) bool { return v.Metadata[cinderprov.MetaIdentity] != identity }), nil
}

// TestStuckCreatingVolumeReplaced: with cinder-scheduler down, the volume
// of a claim stays "creating" with no host, as when cinder-api dies before
// casting a create to the scheduler. The binary, run with a short
// --stuck-creating-timeout, tells the user with an event, force-deletes
// that volume and creates another; once the scheduler is back the claim
// binds to a volume that is not the stuck one, and Cinder holds exactly
// one volume of this provisioner, which goes with the claim.
func TestStuckCreatingVolumeReplaced(t *testing.T) {
	bin := framework.BuildTestBinary(t, "cinder", "cinder-provisioner")
	const (
		name         = "kubeprov.io/cinder-stuck-it"
		id           = name + "/integration"
		stuckTimeout = 8 * time.Second
	)
	ctx := framework.TestContext(t, 5*time.Minute)
	conf := filepath.Join(t.TempDir(), "cloud.conf")
	content := fmt.Sprintf("[Global]\ncinder-endpoint = %s\nusername = admin\ntenant-id = %s\n", cinderAPI.Endpoint, cinderbackend.Project)
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := cp.CreateTestNamespace(t, "cinder-stuck")
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{
		Binary: bin,
		Args: []string{"--kubeconfig", cp.KubeconfigPath, "--provisioner", name, "--identity", id, "--cloud-config", conf,
			"--stuck-creating-timeout", stuckTimeout.String(),
			"--retry-interval-start", "200ms", "--retry-interval-max", "2s", "-v", "2"},
		Env:     []string{"POD_NAMESPACE=" + ns},
		LogPath: filepath.Join(t.TempDir(), "cinder-provisioner.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("cinder-provisioner output:\n%s", p.Log())
		}
	})
	sc := createClass(t, ns, name, map[string]string{"type": "fibre_channel"})

	if err := cinderAPI.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	schedulerDown := true
	// Before the namespace goes: the claim's volume needs the scheduler.
	t.Cleanup(func() {
		if schedulerDown {
			if err := cinderAPI.StartScheduler(context.Background()); err != nil {
				t.Errorf("starting cinder-scheduler again: %v", err)
			}
		}
	})
	pvc := createPVC(ctx, t, ns, sc.Name)

	// The first volume: creating, never scheduled.
	var first volumes.Volume
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		vols, err := volumesOf(ctx, id)
		if err != nil || len(vols) == 0 {
			return false, nil
		}
		first = vols[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no Cinder volume for the claim: %v", err)
	}
	if first.Status != "creating" || first.Host != "" {
		t.Fatalf("volume %s: status %q, host %q; want creating with no host while the scheduler is down", first.ID, first.Status, first.Host)
	}

	// The user is told, and the stuck volume is replaced while the
	// scheduler is still down.
	waitForEventContaining(ctx, t, pvc, "ProvisioningFailed", "cinder volume "+first.ID+" is still creating after --stuck-creating-timeout")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*stuckTimeout, true, func(ctx context.Context) (bool, error) {
		vols, err := volumesOf(ctx, id)
		if err != nil {
			return false, nil
		}
		return len(vols) > 0 && !slices.ContainsFunc(vols, func(v volumes.Volume) bool { return v.ID == first.ID }), nil
	})
	if err != nil {
		vols, _ := volumesOf(ctx, id)
		t.Fatalf("stuck volume %s not replaced within %s: volumes %+v", first.ID, 3*stuckTimeout, vols)
	}

	if err := cinderAPI.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	schedulerDown = false
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	volID := pv.Annotations[cinderprov.AnnVolumeID]
	if volID == first.ID {
		t.Errorf("PV %s names the stuck volume %s", pv.Name, first.ID)
	}
	assertVolumeGone(ctx, t, first.ID)
	// Exactly the PV's volume: the replaced ones are gone, no create the
	// scheduler handled late made another.
	// A replaced volume the scheduler had just placed is deleted by
	// cinder-volume, which takes a moment.
	var vols []volumes.Volume
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		vols, err = volumesOf(ctx, id)
		return err == nil && len(vols) == 1 && vols[0].ID == volID, nil
	})
	if err != nil {
		t.Errorf("Cinder volumes of this provisioner = %+v; want only %s, the PV's", vols, volID)
	}

	deleteClaim(ctx, t, pvc, pv.Name)
	assertVolumeGone(ctx, t, volID)
	if vols, err := volumesOf(ctx, id); err != nil || len(vols) != 0 {
		t.Errorf("Cinder volumes of this provisioner left: %+v (%v)", vols, err)
	}
}
