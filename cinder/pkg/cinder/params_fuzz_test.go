// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"slices"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseParams feeds a StorageClass of up to four parameters (a key
// given twice keeps its last value). Parsing either fails with an error that
// names the class and every unknown key, or accepts only known keys and an
// rbd secret reference that is a valid object name.
func FuzzParseParams(f *testing.F) {
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, k4, v4 string) {
		params := map[string]string{k1: v1, k2: v2, k3: v3, k4: v4}
		p, err := parseParams(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Provisioner: "kubeprov.io/standalone-cinder", Parameters: params})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "StorageClass gold: ") {
				t.Fatalf("error %q does not name the StorageClass", err)
			}
			for k := range params {
				if !slices.Contains(knownParams, k) && !strings.Contains(err.Error(), k) {
					t.Fatalf("error %q does not name the unknown parameter %q", err, k)
				}
			}
			return
		}
		for k := range params {
			if !slices.Contains(knownParams, k) {
				t.Fatalf("unknown parameter %q accepted", k)
			}
		}
		if p.rbdSecretName != "" && len(validation.IsDNS1123Subdomain(p.rbdSecretName)) > 0 {
			t.Fatalf("rbd secret name %q accepted", p.rbdSecretName)
		}
		if p.rbdSecretNamespace != "" && (p.rbdSecretName == "" || len(validation.IsDNS1123Label(p.rbdSecretNamespace)) > 0) {
			t.Fatalf("rbd secret namespace %q (name %q) accepted", p.rbdSecretNamespace, p.rbdSecretName)
		}
	})
}
