// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"strings"
	"testing"
)

// TestNodeManagedBy: the managed-by values upstream's external-provisioner
// gives its node instances (its own test's cases), so that objects survive
// a switch either way.
func TestNodeManagedBy(t *testing.T) {
	for node, want := range map[string]string{
		"node01":                         "external-provisioner-node01",
		"node" + strings.Repeat("a", 38): "external-provisioner-node" + strings.Repeat("a", 38), // 63 characters
		"node" + strings.Repeat("a", 39): "external-p-53f40b57-node" + strings.Repeat("a", 39),
		"node" + strings.Repeat("a", 48): "e-53f40b57-node" + strings.Repeat("a", 48),
		"node" + strings.Repeat("a", 49): "external-provisioner-a3607ff1",
		"node" + strings.Repeat("a", 63): "external-provisioner-df38e37f",
	} {
		if got := NodeManagedBy(node); got != want {
			t.Errorf("NodeManagedBy(%q) = %q, want %q", node, got, want)
		}
		if len(NodeManagedBy(node)) > 63 {
			t.Errorf("NodeManagedBy(%q) is longer than a label value may be", node)
		}
	}
}
