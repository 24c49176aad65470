// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package pathpattern

import (
	"errors"
	"strings"
	"testing"
)

func TestOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a", "a", true}, {"a/b", "a", true}, {"a", "a/b", true}, {"a/x/data", "a", true},
		{"ab", "a", false}, {"a/bc", "a/b", false}, {"x", "y", false},
		{"/share/fast", "/share", true}, {"/share/fast2", "/share/fast", false}, {"/", "/x", true},
	} {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestInUseRefusesNestedDirectories(t *testing.T) {
	var u InUse
	if err := u.Reserve("node-1", "/v/a", "pv-1", "on node node-1", nil); err != nil {
		t.Fatal(err)
	}
	// Again for the same volume (a repeated Provision): fine.
	if err := u.Reserve("node-1", "/v/a", "pv-1", "on node node-1", nil); err != nil {
		t.Errorf("same volume again: %v", err)
	}
	for dir, want := range map[string]string{
		"/v/a":        `directory "/v/a" on node node-1 is already used by PersistentVolume pv-1`,
		"/v/a/x/data": `directory "/v/a/x/data" on node node-1 overlaps directory "/v/a" of PersistentVolume pv-1`,
		"/v":          `directory "/v" on node node-1 overlaps directory "/v/a" of PersistentVolume pv-1`,
	} {
		err := u.Reserve("node-1", dir, "pv-2", "on node node-1", nil)
		if !errors.Is(err, ErrOverlap) || !strings.Contains(err.Error(), want) {
			t.Errorf("Reserve(%s) = %v; want ErrOverlap with %q", dir, err, want)
		}
	}
	// Another scope is another root.
	if err := u.Reserve("node-2", "/v/a/x/data", "pv-2", "on node node-2", nil); err != nil {
		t.Errorf("other node: %v", err)
	}
	// Volumes the caller knows of (its PVs) count alike.
	err := u.Check("node-3", "/v/b/c", "pv-3", "on node node-3", []Volume{{PV: "pv-9", Dir: "/v/b"}})
	if !errors.Is(err, ErrOverlap) {
		t.Errorf("Check against an existing volume: %v", err)
	}
	u.Release("node-1", "/v/a", "pv-1")
	if err := u.Reserve("node-1", "/v/a/x/data", "pv-2", "on node node-1", nil); err != nil {
		t.Errorf("after Release: %v", err)
	}
}
