// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// TestWithLeaseLabelsRejectsInvalidLabels: a label the API server would
// refuse on the Lease is reported when the controller is made, not as a
// leader election that never succeeds.
func TestWithLeaseLabelsRejectsInvalidLabels(t *testing.T) {
	_, err := NewProvisionController(fake.NewClientset(), testProvisioner, newStore(t),
		WithLeaseLabels(map[string]string{"not a key": "v", "ok": "not a value!"}))
	if err == nil {
		t.Fatal("invalid lease labels accepted")
	}
	for _, want := range []string{`WithLeaseLabels: key "not a key"`, `WithLeaseLabels: value "not a value!" of "ok"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := NewProvisionController(fake.NewClientset(), testProvisioner, newStore(t),
		WithLeaseLabels(map[string]string{"app.kubernetes.io/name": "csi-provisioner"})); err != nil {
		t.Fatalf("valid lease labels: %v", err)
	}
}
