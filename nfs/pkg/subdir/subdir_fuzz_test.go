// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/nfs/pkg/params"
)

// FuzzParseParams feeds a subdir-mode StorageClass of up to four
// parameters (a key given twice keeps its last value). Parsing either fails
// with an error naming the class, or gives a configuration the provisioner
// can use as it is: only known keys, a group id Linux accepts, one of the
// onDelete policies, and a directory inside the share.
func FuzzParseParams(f *testing.F) {
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, k4, v4 string) {
		c := class(map[string]string{k1: v1, k2: v2, k3: v3, k4: v4})
		for _, strict := range []bool{false, true} {
			checkParams(t, c, strict)
		}
	})
}

func checkParams(t *testing.T, c *storagev1.StorageClass, strict bool) {
	prov, err := New(Config{Root: "/mnt/default", Server: "nfs.example", Path: "/share", Strict: strict,
		Shares: []Share{{Name: "fast", Root: "/mnt/fast", Server: "nfs.example", Path: "/fast"}}})
	if err != nil {
		t.Fatal(err)
	}
	{
		p, err := prov.parseParams(controller.ProvisionOptions{StorageClass: c, PVC: claim("ns", "data"), PVName: "pvc-1"})
		if err != nil {
			if !strings.Contains(err.Error(), "StorageClass "+c.Name+" ") {
				t.Fatalf("error %q does not name the StorageClass", err)
			}
			return
		}
		if name, given := c.Parameters[KeyShare]; given != (p.share.Name != "") || given && name != p.share.Name {
			t.Fatalf("share parameter %q (given %v) selected share %q", name, given, p.share.Name)
		}
		for k := range c.Parameters {
			if !slices.Contains([]string{params.KeyGID, KeyPathPattern, KeyOnDelete, KeyArchiveOnDelete, KeyReuseExisting, KeyShare}, k) {
				t.Fatalf("unknown parameter %q accepted", k)
			}
		}
		if gid, given := c.Parameters[params.KeyGID]; p.gid == nil && given && !strings.EqualFold(gid, params.GIDNone) {
			t.Fatalf("gid %q ignored", gid)
		}
		if p.gid != nil && (*p.gid < 0 || *p.gid > 1<<31-1) {
			t.Fatalf("gid %d out of range", *p.gid)
		}
		if !slices.Contains([]string{OnDeleteDelete, OnDeleteRetain, OnDeleteArchive}, p.onDelete) {
			t.Fatalf("onDelete %q", p.onDelete)
		}
		if v, given := c.Parameters[KeyReuseExisting]; given {
			if want, _ := strconv.ParseBool(strings.TrimSpace(v)); p.reuse != want {
				t.Fatalf("reuseExisting %q read as %v", v, p.reuse)
			}
		}
		assertInsideShare(t, p.rel)
	}
}
