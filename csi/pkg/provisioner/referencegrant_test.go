// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestReferenceGrantAllows(t *testing.T) {
	grant := func(from, to []any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"from": from, "to": to}}}
	}
	claimsOf := func(ns string) []any {
		return []any{map[string]any{"group": "", "kind": "PersistentVolumeClaim", "namespace": ns}}
	}
	to := func(group, kind, name string) []any {
		m := map[string]any{"group": group, "kind": kind}
		if name != "" {
			m["name"] = name
		}
		return []any{m}
	}
	source := &dataSource{kind: "PersistentVolumeClaim", name: "data", namespace: "owner"}
	snapshot := &dataSource{kind: "VolumeSnapshot", apiGroup: snapshotGroup, name: "snap", namespace: "owner"}
	tests := []struct {
		name string
		g    *unstructured.Unstructured
		d    *dataSource
		want bool
	}{
		{"named claim", grant(claimsOf("team"), to("", "PersistentVolumeClaim", "data")), source, true},
		{"every claim", grant(claimsOf("team"), to("", "PersistentVolumeClaim", "")), source, true},
		{"another claim", grant(claimsOf("team"), to("", "PersistentVolumeClaim", "other")), source, false},
		{"another namespace's claims", grant(claimsOf("elsewhere"), to("", "PersistentVolumeClaim", "")), source, false},
		{"snapshots only", grant(claimsOf("team"), to(snapshotGroup, "VolumeSnapshot", "")), source, false},
		{"a snapshot", grant(claimsOf("team"), to(snapshotGroup, "VolumeSnapshot", "snap")), snapshot, true},
		{"from other kinds", grant([]any{map[string]any{"group": "", "kind": "Pod", "namespace": "team"}}, to("", "PersistentVolumeClaim", "")), source, false},
		{"empty", grant(nil, nil), source, false},
	}
	for _, tc := range tests {
		if got := referenceGrantAllows(tc.g, "team", tc.d); got != tc.want {
			t.Errorf("%s: allows = %v, want %v", tc.name, got, tc.want)
		}
	}
}
