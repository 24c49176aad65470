// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package params

import (
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func class(p map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Parameters: p}
}

func TestCheckKnownNamesEveryUnknownKey(t *testing.T) {
	err := CheckKnown(class(map[string]string{"gid": "1", "zeta": "", "alpha": ""}), KeyGID, KeyRootSquash)
	if err == nil || !strings.Contains(err.Error(), "StorageClass fast has unknown parameter(s) alpha, zeta") ||
		!strings.Contains(err.Error(), "gid, rootSquash") {
		t.Errorf("CheckKnown = %v", err)
	}
	if err := CheckKnown(class(map[string]string{"gid": "1"}), KeyGID); err != nil {
		t.Error(err)
	}
}

func TestGID(t *testing.T) {
	for v, want := range map[string]string{"none": "", "None": "", "0": "0", "65534": "65534", " 12 ": "12"} {
		gid, err := GID(class(map[string]string{"gid": v}))
		if err != nil {
			t.Errorf("GID(%q): %v", v, err)
			continue
		}
		if got := Annotations(gid)[AnnGID]; got != want {
			t.Errorf("GID(%q) annotation %q, want %q", v, got, want)
		}
	}
	if gid, err := GID(class(nil)); gid != nil || err != nil {
		t.Errorf("GID without the key = %v, %v", gid, err)
	}
	for _, v := range []string{"-1", "wheel", "1.5", "4294967296"} {
		if _, err := GID(class(map[string]string{"gid": v})); err == nil || !strings.Contains(err.Error(), "parameter gid") {
			t.Errorf("GID(%q) = %v; want an error naming gid", v, err)
		}
	}
}

func TestBool(t *testing.T) {
	if b, given, err := Bool(class(nil), KeyRootSquash, true); !b || given || err != nil {
		t.Errorf("absent: %v %v %v", b, given, err)
	}
	if b, given, err := Bool(class(map[string]string{KeyRootSquash: "false"}), KeyRootSquash, true); b || !given || err != nil {
		t.Errorf("false: %v %v %v", b, given, err)
	}
	if _, _, err := Bool(class(map[string]string{KeyRootSquash: "yes"}), KeyRootSquash, false); err == nil {
		t.Error("yes accepted")
	}
}
