// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package flex tests flex-provisioner against the real control plane: driver
// scripts run by the exec launcher, and what the container launcher does
// with pods through the API (the pod it creates, the statuses it reads, its
// events, signed records, planted pods), with test/kubeletsim standing in
// for scheduler and kubelet. That stand-in proves no pod runs: test/e2e runs
// the container launcher as deployed on real nodes (the example image, the
// restricted securityContext enforced, images that cannot be pulled).
package flex

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{AuditLog: true, ServiceAccounts: true}, func(c *framework.ControlPlane) { cp = c })
}
