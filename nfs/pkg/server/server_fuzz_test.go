// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strings"
	"testing"

	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	"github.com/kubeprov/external-storage/nfs/pkg/params"
)

// FuzzParseParams feeds a server-mode StorageClass of up to three
// parameters (a key given twice keeps its last value). Parsing either fails
// with an error naming the class, or accepts only gid and rootSquash with
// a group id Linux accepts and a squash Ganesha knows.
func FuzzParseParams(f *testing.F) {
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		o := options("pvc-1", "1Gi", map[string]string{k1: v1, k2: v2, k3: v3})
		p, err := parseParams(o)
		if err != nil {
			if !strings.Contains(err.Error(), "StorageClass "+o.StorageClass.Name+" ") {
				t.Fatalf("error %q does not name the StorageClass", err)
			}
			return
		}
		for k := range o.StorageClass.Parameters {
			if k != params.KeyGID && k != params.KeyRootSquash {
				t.Fatalf("unknown parameter %q accepted", k)
			}
		}
		if p.gid != nil && (*p.gid < 0 || *p.gid > 1<<31-1) {
			t.Fatalf("gid %d out of range", *p.gid)
		}
		if p.squash != ganesha.SquashNone && p.squash != ganesha.SquashRoot {
			t.Fatalf("squash %q", p.squash)
		}
	})
}
