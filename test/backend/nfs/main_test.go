// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs_test

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane of this package's tests.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}
