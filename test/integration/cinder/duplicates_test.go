// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

// createLostVolume creates in Cinder what a replica killed with its create
// on the wire leaves: a volume named after the PV, with the metadata the
// provisioner writes, that no PV records. It waits until it is available.
func createLostVolume(ctx context.Context, t *testing.T, pvName, claim string) string {
	t.Helper()
	vol, err := volumes.Create(ctx, volClient, volumes.CreateOpts{
		Name: pvName, Size: 2, VolumeType: "iscsi",
		Metadata: map[string]string{cinderprov.MetaPVName: pvName, cinderprov.MetaClaim: claim, cinderprov.MetaIdentity: identity},
	}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		v, err := volumes.Get(ctx, volClient, vol.ID).Extract()
		return err == nil && v.Status == "available", nil
	})
	if err != nil {
		t.Fatalf("volume %s not available: %v", vol.ID, err)
	}
	return vol.ID
}

// idsOf lists the IDs of vols, sorted.
func idsOf(vols []volumes.Volume) []string {
	var ids []string
	for _, v := range vols {
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestLostCreatesLeaveNoVolume: Cinder's create is not idempotent, and a
// create whose answer was lost (the fault suite's killed replica) may be
// carried out after the next attempt made the PV's volume. Two volumes the
// provisioner made for one claim before it got to it: the claim binds to
// one, the other is deleted. One made after the claim was bound: deleting
// the claim deletes it with the PV's.
func TestLostCreatesLeaveNoVolume(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	ns := cp.CreateTestNamespace(t, "cinder-lost-creates")
	sc := framework.NewStorageClass(ns, provisionerName, map[string]string{"type": "iscsi"})
	// Nothing is provisioned before the test names the node.
	sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	sc = cp.CreateTestStorageClass(t, sc)
	createZoneNode(ctx, t, ns+"-node", cinderZone(ctx, t))
	pvc := createPVC(ctx, t, ns, sc.Name)
	pvName := "pvc-" + string(pvc.UID)
	claim := ns + "/" + pvc.Name
	first := createLostVolume(ctx, t, pvName, claim)
	second := createLostVolume(ctx, t, pvName, claim)

	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": ns + "-node"}
	if _, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Both available: the older one is kept, by every attempt alike.
	if got := pv.Annotations[cinderprov.AnnVolumeID]; got != first {
		t.Errorf("PV records volume %s, want %s, the first of %s and %s", got, first, first, second)
	}
	var left []volumes.Volume
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		left = volumesNamed(ctx, t, pvName)
		return slices.Equal(idsOf(left), []string{first}), nil
	})
	if err != nil {
		t.Errorf("Cinder volumes named %s: %v; want only %s, the PV's (%s deleted, nothing created)", pvName, idsOf(left), first, second)
	}

	late := createLostVolume(ctx, t, pvName, claim)
	deleteClaim(ctx, t, pvc, pv.Name)
	assertVolumeGone(ctx, t, first)
	assertVolumeGone(ctx, t, late)
}
