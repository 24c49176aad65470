// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs_test

import (
	"testing"

	"github.com/kubeprov/external-storage/test/backend/backendtest"
	"github.com/kubeprov/external-storage/test/backend/nfs"
)

// TestBackend: claims become exports of the backend's Ganesha, each a
// directory of the export root; with Ganesha killed a new claim gets a
// Warning event naming it and binds once Ganesha is back.
func TestBackend(t *testing.T) {
	backendtest.Require(t, nfs.Missing(), "hack/deps/nfs.sh")
	backendtest.Run(t, cp, nfs.New, backendtest.Expect{OutageEvent: "NFS-Ganesha is not running"})
}
