// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package charts checks the Helm charts under charts/: rendered with Helm's
// own engine (helm.sh/helm/v4, the library the helm CLI is made of), each
// chart with its default values gives the objects of its provisioner's
// kustomize deploy (the same permissions, the same pods), its values change
// what they say, and what it renders is accepted by the real API server.
package charts

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}
