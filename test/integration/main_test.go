// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package integration runs tests against the real control plane: etcd,
// kube-apiserver and kube-controller-manager with the volume controllers.
package integration

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{AuditLog: true}, func(c *framework.ControlPlane) { cp = c })
}
