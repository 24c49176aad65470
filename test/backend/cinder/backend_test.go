// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder_test

import (
	"testing"

	"github.com/kubeprov/external-storage/test/backend/backendtest"
	"github.com/kubeprov/external-storage/test/backend/cinder"
)

// TestBackend: claims become Cinder volumes, each PV naming its volume;
// with cinder-api stopped a new claim gets a Warning event showing that
// Cinder does not answer, and binds once the API is back.
func TestBackend(t *testing.T) {
	backendtest.Require(t, cinder.Missing(), "hack/deps/cinder.sh")
	backendtest.Run(t, cp, cinder.New, backendtest.Expect{OutageEvent: "connection refused"})
}
