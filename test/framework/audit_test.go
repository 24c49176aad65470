// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"encoding/json"
	"strings"
	"testing"
)

// testdata/audit-403.jsonl holds refusals as kube-apiserver 1.36.3 logged
// them (audit policy level Metadata, as configureAudit sets), captured from
// the control plane of test/integration's
// TestForbiddenCountsRBACNotTerminatingNamespace and from a pod naming a
// missing PriorityClass:
//   - an event create in a namespace being deleted (NamespaceLifecycle);
//   - a ConfigMap create RBAC refused a ServiceAccount;
//   - a pod create the Priority admission refused;
//   - anonymous GET /healthz RBAC refused.
func readTestAudit(t *testing.T) (terminating, rbac, priority, nonResource AuditEvent) {
	t.Helper()
	events, seen, err := readAudit("testdata/audit-403.jsonl", func(string) bool { return true }, "none")
	if err != nil || seen || len(events) != 4 {
		t.Fatalf("reading testdata/audit-403.jsonl: %d events, %v", len(events), err)
	}
	return events[0], events[1], events[2], events[3]
}

func TestRefusedInTerminatingNamespace(t *testing.T) {
	terminating, rbac, priority, nonResource := readTestAudit(t)
	// The terminating namespace's refusal, with the authorizer's decision
	// changed: an RBAC refusal whatever its status says.
	var forged AuditEvent
	data, err := json.Marshal(terminating)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(strings.Replace(string(data), `"allow"`, `"forbid"`, 1)), &forged); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		e    AuditEvent
		want bool
	}{
		{"event create in a terminating namespace", terminating, true},
		{"ConfigMap create RBAC refused", rbac, false},
		{"pod create the Priority admission refused", priority, false},
		{"GET /healthz RBAC refused", nonResource, false},
		{"terminating namespace, but the authorizer forbade it", forged, false},
	} {
		if got := tc.e.RefusedInTerminatingNamespace(); got != tc.want {
			t.Errorf("%s (%s): RefusedInTerminatingNamespace = %v, want %v", tc.name, tc.e, got, tc.want)
		}
	}
}

// forbidden (what Forbidden and ExpectNoForbidden count) keeps every 403
// but the terminating namespace's.
func TestForbiddenKeepsAllButTerminatingNamespace(t *testing.T) {
	terminating, rbac, priority, nonResource := readTestAudit(t)
	got := forbidden([]AuditEvent{terminating, rbac, priority, nonResource})
	if len(got) != 3 || got[0].String() != rbac.String() || got[1].String() != priority.String() || got[2].String() != nonResource.String() {
		t.Errorf("forbidden = %v, want the RBAC, Priority and /healthz refusals", got)
	}
	if len(forbidden(nil)) != 0 {
		t.Error("forbidden(nil) is not empty")
	}
}
