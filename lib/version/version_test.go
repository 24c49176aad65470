// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install at a tag", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, true, "v0.2.0"},
		{"built in a checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, unstamped},
		{"no module version", &debug.BuildInfo{}, true, unstamped},
		{"no build info", nil, false, unstamped},
	} {
		if got := fromBuildInfo(tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: version %q, want %q", tc.name, got, tc.want)
		}
	}
}
