// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package charts checks the Helm charts under charts/: rendered with Helm's
// own engine (helm.sh/helm/v4, the library the helm CLI is made of), each
// chart with its default values gives the objects of its provisioner's
// kustomize deploy (the same permissions, the same pods), its values change
// what they say, and what it renders is accepted by the real API server.
//
// Helm is pinned at v4.2.4, the newest release built on Kubernetes 0.36
// libraries (v4.3 requires client-go 0.37, which would move this module's
// k8s.io libraries ahead of the control plane's 1.36). It raises only
// kustomize (0.20 to 0.21, what kubectl 1.36 embeds) and a few x/ modules.
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
