// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ports proves the ports of docs/migrating.md on the real control
// plane: each third-party-style provisioner under test/ports is built as its
// authors build it (a module of its own, GOWORK=off), run as a process, killed
// in the middle of a burst of claims and started again; every claim must end
// Bound with one PV and one directory, and deleting the claims must leave no
// PV and no directory.
package ports

import (
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}
