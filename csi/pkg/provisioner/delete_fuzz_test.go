// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDelete deletes a PV whose driver, volume handle and annotations are
// anything a creator or editor of PVs could write: DeleteVolume is only ever
// called for a volume of this provisioner's driver, with that PV's own
// handle, once.
func FuzzDelete(f *testing.F) {
	f.Add(testDriver, "vol-1", "s", "ns")
	f.Add("other.csi.example.com", "vol-1", "", "")
	f.Add(testDriver, "", "", "ns")
	f.Fuzz(func(t *testing.T, driver, handle, secretName, secretNamespace string) {
		p, fc := newTestProvisioner(t, Config{}, secret("ns", "s"))
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{
				AnnDeletionSecretName: secretName, AnnDeletionSecretNamespace: secretNamespace}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}},
		}
		_ = p.Delete(testContext(t), pv)
		for _, d := range fc.deletes {
			if driver != testDriver || d.VolumeId != handle {
				t.Fatalf("DeleteVolume(%q) for a PV of driver %q with handle %q", d.VolumeId, driver, handle)
			}
		}
		if len(fc.deletes) > 1 {
			t.Fatalf("%d DeleteVolume calls", len(fc.deletes))
		}
	})
}
