// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"strings"
	"testing"
)

func TestValidateCapacity(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--capacity-poll-interval=0"}}, // ignored while disabled
		{args: []string{"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=2s"}},
		{args: []string{"--enable-capacity", "--capacity-poll-interval=0"}, wantErr: "--capacity-poll-interval must be more than 0"},
		{args: []string{"--enable-capacity", "--capacity-ownerref-level=-2"}, wantErr: "--capacity-ownerref-level must be -1"},
		{args: []string{"--enable-capacity", "--capacity-threads=0"}, wantErr: "--capacity-threads must be at least 1"},
		{args: []string{"--enable-capacity", "--kube-api-capacity-qps=0"}, wantErr: "--kube-api-capacity-qps"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			checkValidate(t, tc.args, tc.wantErr)
		})
	}
}

func TestCapacityNamespace(t *testing.T) {
	o := NewOptions()
	o.LeaderElectionNamespace = "lease-ns"
	t.Setenv("NAMESPACE", "")
	t.Setenv("POD_NAMESPACE", "")
	if ns, _ := o.capacityNamespace(); ns != "lease-ns" {
		t.Errorf("out of cluster: namespace %q, want the leader election namespace", ns)
	}
	t.Setenv("POD_NAMESPACE", "pod-ns")
	if ns, _ := o.capacityNamespace(); ns != "pod-ns" {
		t.Errorf("with POD_NAMESPACE: namespace %q, want pod-ns", ns)
	}
	t.Setenv("NAMESPACE", "upstream-ns")
	if ns, _ := o.capacityNamespace(); ns != "upstream-ns" {
		t.Errorf("with NAMESPACE: namespace %q, want upstream-ns", ns)
	}
}
