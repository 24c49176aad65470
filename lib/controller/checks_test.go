// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheckParameters(t *testing.T) {
	sc := func(params map[string]string) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/p", Parameters: params}
	}
	for _, tc := range []struct {
		name   string
		class  *storagev1.StorageClass
		known  []string
		wantIn string // "" = no error
	}{
		{"all known", sc(map[string]string{"gid": "1"}), []string{"gid", "mode"}, ""},
		{"none given", sc(nil), nil, ""},
		{"typos named, known listed sorted", sc(map[string]string{"gid": "1", "zeta": "", "alpha": ""}), []string{"mode", "gid"},
			"unknown parameter(s) alpha, zeta: example.com/p understands gid, mode"},
		{"takes none", sc(map[string]string{"x": "1"}), nil, "unknown parameter(s) x: example.com/p takes no parameters"},
	} {
		err := CheckParameters(tc.class, tc.known...)
		if (err == nil) != (tc.wantIn == "") || (err != nil && !strings.Contains(err.Error(), tc.wantIn)) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantIn)
		}
	}
}

func TestCheckAccessModes(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
	}}
	err := CheckAccessModes(claim, corev1.ReadWriteOnce, corev1.ReadWriteOncePod)
	if err == nil || err.Error() != "access mode(s) ReadWriteMany not supported: use ReadWriteOnce or ReadWriteOncePod" {
		t.Fatalf("err = %v", err)
	}
	if err := CheckAccessModes(claim, corev1.ReadWriteOnce, corev1.ReadWriteMany); err != nil {
		t.Fatalf("err = %v", err)
	}
}

func TestCheckOwner(t *testing.T) {
	pv := func(ann map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: ann}}
	}
	if err := CheckOwner(pv(map[string]string{"example.com/owner": "a"}), "example.com/owner", "a"); err != nil {
		t.Errorf("own PV: %v", err)
	}
	for _, other := range []*corev1.PersistentVolume{pv(map[string]string{"example.com/owner": "b"}), pv(nil)} {
		if err := CheckOwner(other, "example.com/owner", "a"); !IsIgnored(err) {
			t.Errorf("PV with annotations %v: err = %v, want an IgnoredError", other.Annotations, err)
		}
	}
}
