// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version holds the version stamped into a binary at build time:
//
//	go build -ldflags "-X github.com/kubeprov/external-storage/lib/version.Version=v0.2.0 \
//	  -X github.com/kubeprov/external-storage/lib/version.Revision=$(git rev-parse HEAD)"
package version

import (
	"fmt"
	"runtime"
)

// Set at build time with -ldflags -X.
var (
	Version  = "v0.0.0-dev"
	Revision = "unknown"
)

// String is what --version prints.
func String() string {
	return fmt.Sprintf("%s (revision %s, %s, %s/%s)", Version, Revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
