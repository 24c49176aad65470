// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
)

func testOptions(size string, params map[string]string) controller.ProvisionOptions {
	return controller.ProvisionOptions{
		PVName: "pvc-123",
		StorageClass: &storagev1.StorageClass{
			ObjectMeta:    metav1.ObjectMeta{Name: "gold"},
			Parameters:    params,
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain),
		},
		PVC: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", UID: "123", ResourceVersion: "7"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		},
	}
}

func TestNewInput(t *testing.T) {
	o := testOptions("1500Mi", map[string]string{"pool": "a", "zone": "west"})
	o.SelectedNodeName = "node-1"
	in, err := NewInput(o)
	if err != nil {
		t.Fatal(err)
	}
	want := Input{
		"pool": "a", "zone": "west",
		KeyPVName: "pvc-123", KeyPVCName: "data", KeyPVCNamespace: "apps", KeyPVCUID: "123",
		KeyStorageClass: "gold", KeyReclaimPolicy: "Retain", KeyAccessModes: "ReadWriteOnce,ReadOnlyMany",
		KeyVolumeMode: "Filesystem", KeySelectedNode: "node-1",
		KeyRequestBytes: "1572864000", KeyRequestMiB: "1500", KeyRequestGiB: "2",
	}
	if in.JSON() != want.JSON() {
		t.Errorf("input\n got %s\nwant %s", in.JSON(), want.JSON())
	}
	back, err := ParseInput(in.JSON())
	if err != nil || back.JSON() != in.JSON() {
		t.Errorf("round trip: %v, %v", back, err)
	}
}

func TestNewInputRoundsUp(t *testing.T) {
	for _, tc := range []struct{ size, bytes, mib, gib string }{
		{"1", "1", "1", "1"},
		{"1Gi", "1073741824", "1024", "1"},
		{"1G", "1000000000", "954", "1"},
		{"1025Mi", "1074790400", "1025", "2"},
		{"500m", "1", "1", "1"}, // half a byte is a byte
	} {
		in, err := NewInput(testOptions(tc.size, nil))
		if err != nil {
			t.Fatal(err)
		}
		if in[KeyRequestBytes] != tc.bytes || in[KeyRequestMiB] != tc.mib || in[KeyRequestGiB] != tc.gib {
			t.Errorf("%s: bytes %s MiB %s GiB %s, want %s %s %s", tc.size, in[KeyRequestBytes], in[KeyRequestMiB], in[KeyRequestGiB], tc.bytes, tc.mib, tc.gib)
		}
	}
}

// TestNewInputHugeRequests: a request beyond int64 bytes is refused, not
// wrapped around to a negative or zero size.
func TestNewInputHugeRequests(t *testing.T) {
	for _, size := range []string{"9223372036854775808", "9.3e18", "1e30", "16Ei"} {
		_, err := NewInput(testOptions(size, nil))
		q := resource.MustParse(size)
		want := "claim apps/data: storage request: size " + q.String() + " is too large: request less"
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", size, err, want)
		}
	}
}

func TestNewInputRejectsReservedParameters(t *testing.T) {
	_, err := NewInput(testOptions("1Gi", map[string]string{"kubernetes.io/pvc/name": "x", "requestGiB": "9", "ok": "1"}))
	if err == nil || !strings.Contains(err.Error(), "kubernetes.io/pvc/name, requestGiB are reserved") || !strings.Contains(err.Error(), `StorageClass "gold"`) {
		t.Errorf("err = %v", err)
	}
}

func TestParseInputRejectsNonObjects(t *testing.T) {
	for _, s := range []string{"", "null", "[]", `{"a": 1}`} {
		if _, err := ParseInput(s); err == nil {
			t.Errorf("ParseInput(%q) succeeded", s)
		}
	}
}
