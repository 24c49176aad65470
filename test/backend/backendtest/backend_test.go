// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package backendtest_test

import (
	"testing"

	"github.com/kubeprov/external-storage/test/backend/backendtest"
	"github.com/kubeprov/external-storage/test/backend/csi"
	"github.com/kubeprov/external-storage/test/backend/flex"
	"github.com/kubeprov/external-storage/test/backend/hostpath"
	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}

// TestHostpath: claims become directories; there is no outage.
func TestHostpath(t *testing.T) {
	backendtest.Run(t, cp, hostpath.New, backendtest.Expect{})
}

// TestCSI: claims become volumes of the test driver; with the driver's
// socket gone a new claim gets a Warning and binds once it is back.
func TestCSI(t *testing.T) {
	backendtest.Run(t, cp, csi.New, backendtest.Expect{OutageEvent: "Unavailable"})
}

// TestCSIProcess: TestCSI with the driver as a process of its own, its
// volumes on disk; the outage kills it (SIGKILL) and restarts it on them.
func TestCSIProcess(t *testing.T) {
	backendtest.Run(t, cp, csi.NewProcess, backendtest.Expect{OutageEvent: "Unavailable"})
}

// TestFlex: claims become directories of the driver script; with the
// driver hanging a new claim's run is killed at --driver-timeout (shorter
// than the backend's, yet long enough for a run on a busy machine), reported
// in a Warning, and the claim binds once the driver answers.
func TestFlex(t *testing.T) {
	backendtest.Require(t, flex.Missing(), "hack/deps/flex.sh")
	backendtest.Run(t, cp, flex.New, backendtest.Expect{
		OutageEvent: "did not finish within --driver-timeout 5s",
		ExtraArgs:   []string{"--driver-timeout=5s"},
	})
}
