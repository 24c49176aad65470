// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package pathpattern

import (
	"errors"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzExpandTemplate feeds a Go-template pattern and a claim label and
// annotation. It never panics; it either refuses with ErrPathPattern or
// gives a plain relative path; and it gives the same answer for a claim
// that holds only the keys TemplateKeys lists, which is all a restarted
// controller keeps of a claim (controller.ClaimMetadataReader).
func FuzzExpandTemplate(f *testing.F) {
	f.Fuzz(func(t *testing.T, pattern, labelKey, labelValue, annotationValue string) {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "data", UID: "uid-1",
			Labels:      map[string]string{labelKey: labelValue, "app": labelValue},
			Annotations: map[string]string{labelKey: annotationValue, "team": annotationValue},
		}}
		rel, err := ExpandTemplate(pattern, pvc, "pvc-1", Rules{Root: "the root"})
		if err != nil {
			if !errors.Is(err, ErrPathPattern) {
				t.Fatalf("ExpandTemplate(%q): error %v does not wrap ErrPathPattern", pattern, err)
			}
			return
		}
		if verr := ValidateRelative(rel); verr != nil {
			t.Fatalf("ExpandTemplate(%q) = %q: %v", pattern, rel, verr)
		}
		labels, annotations, kerr := TemplateKeys(pattern)
		if kerr != nil {
			t.Fatalf("ExpandTemplate(%q) succeeded, TemplateKeys failed: %v", pattern, kerr)
		}
		kept := pvc.DeepCopy()
		maps.DeleteFunc(kept.Labels, func(k, _ string) bool { return !slices.Contains(labels, k) })
		maps.DeleteFunc(kept.Annotations, func(k, _ string) bool { return !slices.Contains(annotations, k) })
		if again, err := ExpandTemplate(pattern, kept, "pvc-1", Rules{Root: "the root"}); err != nil || again != rel {
			t.Fatalf("ExpandTemplate(%q) = %q, but %q, %v with only the listed keys %v %v", pattern, rel, again, err, labels, annotations)
		}
	})
}
