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

func TestMain(m *testing.M) {
	os.Exit(cluster.RunMain(m, cluster.Options{Nodes: 2, SharedDirs: []string{flexShare}}, func(started *cluster.Cluster) { c = started }))
}
