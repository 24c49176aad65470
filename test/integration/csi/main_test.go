// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package csi tests csi-provisioner, run as its real binary, against the
// real control plane and a stateful CSI driver (test/csidriver) on a unix
// socket: what a user observes (claims bound, PV fields, Warning events) and
// what the driver ends up holding (no leaked volumes). The driver is served
// in the test process, or with CSI_TEST_DRIVER=process is a process of its
// own with its volumes on disk (see driverKind).
package csi

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{
		AuditLog: true,
		// dataSourceRef.namespace is kept only with this gate (alpha).
		APIServerArgs: map[string][]string{"feature-gates": {"CrossNamespaceVolumeDataSource=true"}},
	}, func(c *framework.ControlPlane) { cp = c })
}
