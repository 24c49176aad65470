// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"math"
	"runtime/debug"
	"strconv"
	"testing"
)

func TestStartupGCFor(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	small := int64(128 << 20)
	for _, tc := range []struct {
		name      string
		getenv    func(string) string
		container int64
		want      startupGC
	}{
		{"no container limit", env(), 0, startupGC{startupGCPercent, startupMemoryLimit}},
		{"a small container", env(), small, startupGC{startupGCPercent, int64(float64(small) * startupMemoryShare)}},
		{"a large container", env(), 8 << 30, startupGC{startupGCPercent, startupMemoryLimit}},
		{"the operator's GOGC", env("GOGC", "50"), 0, startupGC{0, startupMemoryLimit}},
		{"the operator's GOMEMLIMIT", env("GOMEMLIMIT", "1GiB"), 128 << 20, startupGC{startupGCPercent, 0}},
		{"both", env("GOGC", "off", "GOMEMLIMIT", "1GiB"), 0, startupGC{}},
	} {
		if got := startupGCFor(tc.getenv, tc.container); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseMemoryLimit(t *testing.T) {
	for in, want := range map[string]int64{
		"max\n":                     0,         // cgroup v2 without a limit
		"9223372036854771712\n":     0,         // cgroup v1 without a limit
		"134217728\n":               134217728, // 128 MiB
		"":                          0,
		"garbage":                   0,
		strconv.Itoa(math.MaxInt32): math.MaxInt32,
	} {
		if got := parseMemoryLimit(in); got != want {
			t.Errorf("parseMemoryLimit(%q) = %d, want %d", in, got, want)
		}
	}
}

// The start-up's settings hold until restore, which puts back exactly
// what was there: an operator's or the runtime's.
func TestStartupGCApplyRestores(t *testing.T) {
	gcBefore := debug.SetGCPercent(150)
	limitBefore := debug.SetMemoryLimit(3 << 30)
	t.Cleanup(func() {
		debug.SetGCPercent(gcBefore)
		debug.SetMemoryLimit(limitBefore)
	})

	restore := startupGC{gcPercent: 400, memoryLimit: 256 << 20}.apply()
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GOGC during start-up = %d, want 400", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 256<<20 {
		t.Errorf("memory limit during start-up = %d, want %d", got, 256<<20)
	}
	restore()
	if got := debug.SetGCPercent(-1); got != 150 {
		t.Errorf("GOGC after start-up = %d, want 150 as before", got)
	}
	debug.SetGCPercent(150)
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Errorf("memory limit after start-up = %d, want %d as before", got, 3<<30)
	}

	// Left alone: nothing is changed, nothing restored.
	restore = startupGC{}.apply()
	debug.SetGCPercent(77)
	restore()
	if got := debug.SetGCPercent(150); got != 77 {
		t.Errorf("GOGC = %d after a restore of nothing, want 77 as set meanwhile", got)
	}
}
