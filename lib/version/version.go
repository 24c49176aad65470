// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version holds the version stamped into a binary at build time:
//
//	go build -ldflags "-X github.com/kubeprov/external-storage/lib/version.Version=v0.2.0 \
//	  -X github.com/kubeprov/external-storage/lib/version.Revision=$(git rev-parse HEAD)"
//
// A binary installed with `go install <module>/cmd/<binary>@v0.2.0` has no
// stamp: it reports the module version the go command recorded in it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// unstamped is Version when -ldflags did not set it.
const unstamped = "v0.0.0-dev"

// Set at build time with -ldflags -X.
var (
	Version  = unstamped
	Revision = "unknown"
)

func init() {
	if Version == unstamped {
		Version = fromBuildInfo(debug.ReadBuildInfo())
	}
}

// fromBuildInfo is the main module's version that `go install ...@version`
// records, or unstamped for a build from a checkout ("(devel)"), which would
// say less.
func fromBuildInfo(info *debug.BuildInfo, ok bool) string {
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return unstamped
	}
	return info.Main.Version
}

// String is what --version prints.
func String() string {
	return fmt.Sprintf("%s (revision %s, %s, %s/%s)", Version, Revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
