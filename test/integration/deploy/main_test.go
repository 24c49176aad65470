// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package deploy checks every provisioner's kustomize manifests against the
// real API server: they build, every object passes a server-side dry-run
// apply, the images are the ones make push publishes, and the RBAC grants
// each provisioner's ServiceAccount what its code calls and nothing more.
package deploy

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}
