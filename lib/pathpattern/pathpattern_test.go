// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package pathpattern

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "data",
		Labels:      map[string]string{"app": "db"},
		Annotations: map[string]string{"dir": "../x"},
	}}
}

var rules = Rules{Default: "${.PV.name}", Root: "the node path", MaxBytes: 20, MaxBytesReason: "this test allows"}

func TestExpand(t *testing.T) {
	for pattern, want := range map[string]string{
		"":                               "pvc-1",
		"${.PVC.namespace}/${.PVC.name}": "ns/data",
		"${.PVC.labels.app}-${.PV.name}": "db-pvc-1",
		"fixed":                          "fixed",
	} {
		if got, err := Expand(pattern, claim(), "pvc-1", rules); err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", pattern, got, err, want)
		}
	}
}

func TestExpandRefuses(t *testing.T) {
	for pattern, wantErr := range map[string]string{
		"/abs":                    "it must be relative to the node path, not absolute",
		"{{ .PVC.Namespace }}/x":  "Go templates ({{ .PVC.Name }}) are not supported",
		"${.PVC.annotations.dir}": `it expands to "../x", which could leave the node path`,
		"${.PVC.labels.none}":     `the claim has no label "none"`,
		"aaaaaaaaaaaaaaaaaaaaa":   "more than the 20 this test allows",
		"${.PVC.uid}":             "unknown variable ${.PVC.uid}",
	} {
		got, err := Expand(pattern, claim(), "pvc-1", rules)
		if !errors.Is(err, ErrPathPattern) || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("Expand(%q) = %q, %v; want an ErrPathPattern containing %q", pattern, got, err, wantErr)
		}
	}
}

func TestValidateRelative(t *testing.T) {
	for _, rel := range []string{"", "/a", "a/../b", "a//b", "a/", ".", "a\x00b", strings.Repeat("x", 256)} {
		if err := ValidateRelative(rel); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ValidateRelative(%q) = %v, want ErrInvalidPath", rel, err)
		}
	}
	for _, rel := range []string{"a", "a/b", "..a", "a..", strings.Repeat("x", 255)} {
		if err := ValidateRelative(rel); err != nil {
			t.Errorf("ValidateRelative(%q) = %v", rel, err)
		}
	}
}

func TestMetadataKeys(t *testing.T) {
	l, a := MetadataKeys("${.PVC.labels.app}/${.PVC.annotations.team}/${.PV.name}")
	if len(l) != 1 || l[0] != "app" || len(a) != 1 || a[0] != "team" {
		t.Errorf("MetadataKeys = %v, %v", l, a)
	}
}
