// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
)

func TestSealedSecret(t *testing.T) {
	secret := func(uid, seal string, sealed bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns", UID: "u1"}}
		s.UID = apitypes.UID(uid)
		if sealed {
			s.Annotations = map[string]string{SealAnnotation: seal}
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    *corev1.Secret
		want Rule
	}{
		{"sealed with its own UID", secret("u1", "u1", true), ""},
		{"created by someone else", secret("u1", "", false), RuleSealedSecret},
		{"sealed with another object's UID", secret("u1", "u0", true), RuleSealedSecret},
		{"an empty seal on a real object", secret("u1", "", true), RuleSealedSecret},
	} {
		if got := Refused(SealedSecret(tc.s)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFreshEntry(t *testing.T) {
	for _, tc := range []struct {
		e    Entry
		want Rule
	}{
		{Entry{Signed: true, Current: true, Generation: 3}, ""},
		{Entry{Signed: true, Earlier: true, Generation: 3}, RuleFreshEntry},
		{Entry{Signed: true, Generation: 3}, RuleFreshEntry},
		{Entry{}, RuleFreshEntry},
	} {
		if got := Refused(FreshEntry(tc.e)); got != tc.want {
			t.Errorf("%+v: refused by %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestFinishOrphan(t *testing.T) {
	retain, del := corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete
	keeps := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, ReclaimPolicy: &retain}
	deletes := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, ReclaimPolicy: &del}
	for _, tc := range []struct {
		name string
		o    Orphan
		want Rule
	}{
		{"delete class, ID recorded", Orphan{Recorded: deletes, Current: deletes, AssetIDRecorded: true}, ""},
		{"delete class, no ID, same holder", Orphan{Recorded: deletes}, ""},
		{"delete class, ID recorded, another holder", Orphan{Recorded: deletes, AssetIDRecorded: true, LeaseChange: "x"}, ""},
		{"delete class, no ID, another holder", Orphan{Recorded: deletes, LeaseChange: "x"}, RuleSameLeaseTerm},
		{"recorded class retains", Orphan{Recorded: keeps, Current: deletes, AssetIDRecorded: true}, RuleKeepRetained},
		{"class now retains", Orphan{Recorded: deletes, Current: keeps}, RuleKeepRetained},
		{"incomplete claim", Orphan{Recorded: deletes, ClaimIncomplete: true, AssetIDRecorded: true}, RuleWholeRecord},
	} {
		if got := Refused(FinishOrphan(tc.o)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDeleteVolume(t *testing.T) {
	now := metav1.Now()
	pv := func(policy corev1.PersistentVolumeReclaimPolicy, phase corev1.PersistentVolumePhase, deleting bool) *corev1.PersistentVolume {
		p := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		pv        *corev1.PersistentVolume
		finalizer bool
		want      Rule
	}{
		{"released, Delete", pv(corev1.PersistentVolumeReclaimDelete, corev1.VolumeReleased, false), false, ""},
		{"released, Retain", pv(corev1.PersistentVolumeReclaimRetain, corev1.VolumeReleased, false), false, RuleReleasedForDelete},
		{"bound", pv(corev1.PersistentVolumeReclaimDelete, corev1.VolumeBound, false), false, RuleReleasedForDelete},
		{"deleted first, with finalizer", pv(corev1.PersistentVolumeReclaimDelete, corev1.VolumeAvailable, true), true, ""},
		{"deleted first, without finalizer", pv(corev1.PersistentVolumeReclaimDelete, corev1.VolumeReleased, true), false, RuleReleasedForDelete},
		{"deleted while bound", pv(corev1.PersistentVolumeReclaimDelete, corev1.VolumeBound, true), true, RuleReleasedForDelete},
	} {
		if got := Refused(DeleteVolume(tc.pv, tc.finalizer)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAdoptPod(t *testing.T) {
	if AdoptPod("") != nil || Refused(AdoptPod("spec.containers")) != RuleSameIntent {
		t.Error("a pod is adopted exactly when nothing differs")
	}
}

func TestHandOutDirectory(t *testing.T) {
	for _, tc := range []struct {
		name          string
		namedByVolume bool
		entries       int
		want          Rule
	}{
		{"a new or empty directory a pattern named", false, 0, ""},
		{"retained data under a patterned name", false, 1, RuleEmptyDirectory},
		{"the volume's own directory, resumed", true, 3, ""},
	} {
		if got := Refused(HandOutDirectory("/srv/ns/claim", tc.namedByVolume, tc.entries)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSweepFinalizer(t *testing.T) {
	for _, tc := range []struct {
		name           string
		boundTo, drive string
		want           Rule
	}{
		{"our driver's snapshot", "ns/snap", "ours.example.com", ""},
		{"another driver's snapshot", "ns/snap", "theirs.example.com", RuleOwnSnapshot},
		{"no content", "", "", RuleOwnSnapshot},
		{"a content bound to another snapshot", "ns/other", "ours.example.com", RuleOwnSnapshot},
	} {
		if got := Refused(SweepFinalizer("ns/snap", tc.boundTo, tc.drive, "ours.example.com")); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDeleteDuplicate(t *testing.T) {
	dup := Duplicate{Asset: "vol-2", MadeFor: "pvc-1", Volume: "pvc-1", Kept: "vol-1"}
	for _, tc := range []struct {
		name string
		edit func(*Duplicate)
		want Rule
	}{
		{"made for this volume by us, unused, another kept", func(*Duplicate) {}, ""},
		{"nothing known to be kept", func(d *Duplicate) { d.Kept = "" }, RuleOneAssetPerVolume},
		{"the kept asset itself", func(d *Duplicate) { d.Asset = "vol-1" }, RuleOneAssetPerVolume},
		{"made for another volume", func(d *Duplicate) { d.MadeFor = "pvc-9" }, RuleOneAssetPerVolume},
		{"another provisioner's, same name", func(d *Duplicate) { d.MadeFor = "" }, RuleOneAssetPerVolume},
		{"in use", func(d *Duplicate) { d.InUse = true }, RuleOneAssetPerVolume},
	} {
		d := dup
		tc.edit(&d)
		if got := Refused(DeleteDuplicate(d)); got != tc.want {
			t.Errorf("%s: refused by %q, want %q", tc.name, got, tc.want)
		}
	}
}
