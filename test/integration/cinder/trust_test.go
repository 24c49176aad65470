// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

// A PV whose cinderVolumeId annotation was edited to name another claim's
// volume: deleting its claim deletes nothing in Cinder. The PV gets a
// Warning event, and the other volume stays; once the annotation is put
// back, the PV's own volume is deleted as usual.
func TestEditedVolumeAnnotationDeletesNothing(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	ns := cp.CreateTestNamespace(t, "cinder-trust")
	class := createClass(t, ns, provisionerName, map[string]string{"type": "rbd", "rbdSecretName": "ceph-cinder"})
	victimNS := cp.CreateTestNamespace(t, "cinder-victim")
	victimClass := createClass(t, victimNS, provisionerName, map[string]string{"type": "rbd", "rbdSecretName": "ceph-cinder"})
	pvc := createPVC(ctx, t, ns, class.Name)
	victim := createPVC(ctx, t, victimNS, victimClass.Name)
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	_, victimPV, err := framework.WaitForPVCBound(ctx, cp.Client, victimNS, victim.Name)
	if err != nil {
		t.Fatal(err)
	}
	ownID, victimID := pv.Annotations[cinderprov.AnnVolumeID], victimPV.Annotations[cinderprov.AnnVolumeID]
	annotate := func(id string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{cinderprov.AnnVolumeID: id}}})
		if _, err := cp.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate(victimID)

	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForEventContaining(ctx, t, pv, "VolumeFailedDelete", "was not created by this provisioner for this PV")
	if v, err := volumes.Get(ctx, volClient, victimID).Extract(); err != nil || v.Status == "deleting" {
		t.Fatalf("the other claim's volume %s was touched: %+v, %v", victimID, v, err)
	}

	annotate(ownID)
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	assertVolumeGone(ctx, t, ownID)
	deleteClaim(context.WithoutCancel(ctx), t, victim, victimPV.Name)
}
