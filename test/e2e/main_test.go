// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"testing"

	"github.com/kubeprov/external-storage/test/cluster"
)

// c is the cluster every test of the package shares.
var c *cluster.Cluster

// TestMain runs the suite on a two-node cluster with an audit log. After
// the tests, whatever they installed, the suite fails if the API server
// refused any request of a provisioner's ServiceAccount
// (CheckProvisionersNeverForbidden): every case is checked without asking.
func TestMain(m *testing.M) {
	os.Exit(cluster.RunMain(m, cluster.Options{Nodes: 2, AuditLog: true, AfterTests: CheckProvisionersNeverForbidden, SharedDirs: []string{flexShare}},
		func(started *cluster.Cluster) { c = started }))
}
