// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package flex tests flex-provisioner against the real control plane: driver
// scripts run by the exec launcher, and provisioning pods run by the
// container launcher with test/kubeletsim as scheduler and kubelet.
package flex

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{AuditLog: true}, func(c *framework.ControlPlane) { cp = c })
}
