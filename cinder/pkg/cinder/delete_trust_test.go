// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumesOfOthers puts into the fake Cinder what a shared project holds
// besides this provisioner's volume: another instance's, another PV's, and
// a volume nobody labeled.
func volumesOfOthers(f *fakeCinder) []*fakeVolume {
	return []*fakeVolume{
		f.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusInUse, Metadata: map[string]string{MetaIdentity: "another-cluster", MetaPVName: testPV}}),
		f.addVolume(fakeVolume{Name: "pvc-other", Size: 1, Status: statusAvailable, Metadata: map[string]string{MetaIdentity: testIdentity, MetaPVName: "pvc-other"}}),
		f.addVolume(fakeVolume{Name: "database", Size: 100, Status: statusInUse}),
	}
}

// A PV annotation naming a Cinder volume that this provisioner did not
// create for this PV deletes nothing: the volume's own metadata decides.
func TestDeleteChecksTheVolumesOwnMetadata(t *testing.T) {
	e := newEnv(t)
	for _, v := range volumesOfOthers(e.cinder) {
		t.Run(v.Name+"/"+v.Metadata[MetaIdentity], func(t *testing.T) {
			e.cinder.resetCalls()
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testPV, Annotations: map[string]string{AnnVolumeID: v.ID, AnnIdentity: testIdentity}}}
			err := e.p.Delete(ctx(t), pv)
			if err == nil || !strings.Contains(err.Error(), "was not created by this provisioner for this PV") {
				t.Fatalf("err = %v", err)
			}
			assertCalls(t, e.cinder)
		})
	}
	if e.cinder.count() != 3 {
		t.Fatalf("%d volumes left of 3", e.cinder.count())
	}
}

// FuzzDelete gives Delete PVs whose annotations are anything someone who can
// edit PVs could write, against a Cinder holding volumes of others and one
// of this provisioner for another PV: none of them is ever terminated,
// unreserved or deleted.
func FuzzDelete(f *testing.F) {
	f.Add("vol-1", testIdentity, `{"initiator":"x"}`, "apps/"+testPV+"-chap")
	f.Add("vol-2", testIdentity, "", "")
	f.Add("vol-3", "anything", "{}", "kube-system/admin-token")
	f.Add("../vol-1", testIdentity, "", "")
	f.Fuzz(func(t *testing.T, volumeID, identity, connector, secret string) {
		e := newEnv(t)
		volumesOfOthers(e.cinder)
		e.cinder.resetCalls()
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testPV, Annotations: map[string]string{
			AnnVolumeID: volumeID, AnnIdentity: identity, AnnConnector: connector, AnnAuthSecret: secret,
		}}}
		_ = e.p.Delete(ctx(t), pv)
		for _, call := range e.cinder.actions() {
			if call != "list" {
				t.Fatalf("Delete called %q on a volume it did not create (annotations %v)", call, pv.Annotations)
			}
		}
		if e.cinder.count() != 3 {
			t.Fatalf("a volume of someone else was deleted (annotations %v)", pv.Annotations)
		}
	})
}
