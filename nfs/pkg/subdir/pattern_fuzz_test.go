// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"errors"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzPathPattern feeds a pathPattern and everything it can refer to.
// Whatever the claim's author puts in the claim's name, labels and
// annotations, Expand either fails with ErrPathPattern or names a directory
// inside the share.
func FuzzPathPattern(f *testing.F) {
	f.Fuzz(func(t *testing.T, pattern, namespace, name, pvName, labelKey, labelValue, annKey, annValue string) {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels:      map[string]string{labelKey: labelValue},
			Annotations: map[string]string{annKey: annValue},
		}}
		strictRel, strictErr := ExpandStrict(pattern, pvc, pvName)
		if strictErr != nil && !errors.Is(strictErr, ErrPathPattern) {
			t.Fatalf("ExpandStrict(%.200q) error %v does not wrap ErrPathPattern", pattern, strictErr)
		}
		if strictErr == nil {
			assertInsideShare(t, strictRel)
			if pattern != "" && !strings.Contains(pattern, "${") && strictRel != pattern {
				t.Fatalf("pattern %.200q without variables expands to %.200q", pattern, strictRel)
			}
		}
		rel, err := Expand(pattern, pvc, pvName)
		if err != nil {
			if !errors.Is(err, ErrPathPattern) {
				t.Fatalf("Expand(%.200q) error %v does not wrap ErrPathPattern", pattern, err)
			}
			if strictErr == nil {
				t.Fatalf("Expand(%.200q) fails (%v) where ExpandStrict gives %.200q", pattern, err, strictRel)
			}
			return
		}
		assertInsideShare(t, rel)
		// Leniency only fills in what strict mode refuses.
		if strictErr == nil && rel != strictRel {
			t.Fatalf("Expand(%.200q) = %.200q, ExpandStrict = %.200q", pattern, rel, strictRel)
		}
	})
}

// assertInsideShare checks that rel is a directory strictly inside the share
// whatever the share's path: relative, clean, without NUL, of names a
// filesystem accepts, of a length NFS clients can mount.
func assertInsideShare(t *testing.T, rel string) {
	t.Helper()
	const share = "/export/share"
	switch full := path.Join(share, rel); {
	case rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel:
		t.Fatalf("directory %.200q is not a clean relative path", rel)
	case !strings.HasPrefix(full, share+"/"):
		t.Fatalf("directory %.200q leaves the share: %.200q", rel, full)
	case strings.ContainsRune(rel, 0):
		t.Fatalf("directory %.200q contains a NUL byte", rel)
	case len(rel) > MaxPathBytes:
		t.Fatalf("directory %.200q is %d bytes long, more than %d", rel, len(rel), MaxPathBytes)
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 {
			t.Fatalf("directory %.200q has the component %.200q", rel, c)
		}
	}
}
