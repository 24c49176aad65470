// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// With WithUnprovisionedVolumeDeletion the controller deletes the Released
// PVs sig-storage-lib-external-provisioner v13 deletes without having
// provisioned them (static CSI PVs of its driver, PVs migrated to it), and
// still only those; without it, only the PVs it provisioned.
func TestUnprovisionedVolumeDeletion(t *testing.T) {
	const other = "other.example.com"
	static := func(pv *corev1.PersistentVolume) { delete(pv.Annotations, AnnProvisionedBy) }
	csiDriver := func(driver string) func(*corev1.PersistentVolume) {
		return func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1"}
		}
	}
	annotate := func(key, value string) func(*corev1.PersistentVolume) {
		return func(pv *corev1.PersistentVolume) { pv.Annotations[key] = value }
	}
	phase := func(p corev1.PersistentVolumePhase) func(*corev1.PersistentVolume) {
		return func(pv *corev1.PersistentVolume) { pv.Status.Phase = p }
	}
	for _, tc := range []struct {
		name           string
		policy         corev1.PersistentVolumeReclaimPolicy
		mutate         []func(*corev1.PersistentVolume)
		deletedWith    bool // with the option
		deletedWithout bool // by default
	}{
		{name: "provisioned by us", policy: corev1.PersistentVolumeReclaimDelete, deletedWith: true, deletedWithout: true},
		{name: "static CSI PV of our driver", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){static, csiDriver(testProvisioner)}, deletedWith: true},
		{name: "static CSI PV of our driver, reclaim Retain", policy: corev1.PersistentVolumeReclaimRetain,
			mutate: []func(*corev1.PersistentVolume){static, csiDriver(testProvisioner)}},
		{name: "static CSI PV of our driver, still Bound", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){static, csiDriver(testProvisioner), phase(corev1.VolumeBound)}},
		{name: "static CSI PV of another driver", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){static, csiDriver(other)}},
		{name: "static CSI PV of another driver, migrated-to us", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){static, csiDriver(other), annotate(AnnMigratedTo, testProvisioner)}},
		{name: "static in-tree PV migrated to us", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){static, annotate(AnnMigratedTo, testProvisioner)}, deletedWith: true},
		{name: "static in-tree PV migrated elsewhere", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){static, annotate(AnnMigratedTo, other)}},
		{name: "static in-tree PV", policy: corev1.PersistentVolumeReclaimDelete, mutate: []func(*corev1.PersistentVolume){static}},
		{name: "provisioned by another, migrated to us", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){annotate(AnnProvisionedBy, "kubernetes.io/cinder"), annotate(AnnMigratedTo, testProvisioner)}, deletedWith: true},
		{name: "provisioned by another, CSI PV of our driver", policy: corev1.PersistentVolumeReclaimDelete,
			mutate: []func(*corev1.PersistentVolume){annotate(AnnProvisionedBy, other), csiDriver(testProvisioner)}},
	} {
		for _, enabled := range []bool{true, false} {
			want := tc.deletedWithout
			if enabled {
				want = tc.deletedWith
			}
			t.Run(tc.name, func(t *testing.T) {
				pv := releasedPV("pv-1", tc.policy, tc.mutate...)
				f := newFixture(t, newStore(t), []Option{WithUnprovisionedVolumeDeletion(enabled)}, pv)
				if err := f.c.syncVolume(f.ctx, "pv-1"); err != nil {
					t.Fatal(err)
				}
				if deleted := len(f.store.deletes) == 1 && f.pv("pv-1") == nil; deleted != want {
					t.Fatalf("WithUnprovisionedVolumeDeletion(%v): deleted %v, want %v (Delete calls %v)", enabled, deleted, want, f.store.deletes)
				}
			})
		}
	}
}

// The PV names the class's provisioner, which may be one of the extra
// names: kube-controller-manager marks a PV whose provisioned-by is an
// in-tree plugin's name as migrated to the CSI driver serving it.
func TestProvisionedByIsTheClassProvisioner(t *testing.T) {
	const inTree = "kubernetes.io/cinder"
	sc := class("gold", func(sc *storagev1.StorageClass) { sc.Provisioner = inTree })
	f := newFixture(t, newStore(t), []Option{WithExtraProvisionerNames(inTree)}, sc, claim("c", "gold"))
	if err := f.c.syncClaim(f.ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	pv := f.pv("pvc-uid-c")
	if pv == nil {
		t.Fatal("claim of an extra name not provisioned")
	}
	if got := pv.Annotations[AnnProvisionedBy]; got != inTree {
		t.Fatalf("%s = %q, want the class's provisioner %q", AnnProvisionedBy, got, inTree)
	}
}
