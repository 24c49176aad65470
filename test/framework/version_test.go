// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
)

// A suite asked to run on one Kubernetes version refuses a kube-apiserver of
// another, so that the oldest minor's phase cannot pass on the newest.
func TestCheckServerVersion(t *testing.T) {
	for _, tc := range []struct {
		env, server, wantErr string
	}{
		{env: "", server: "v1.36.3"},
		{env: "v1.34.4", server: "v1.34.4"},
		{env: "1.34.4", server: "v1.34.4"},
		{env: "v1.34.4", server: "v1.36.3", wantErr: "KUBEPROV_KUBE_VERSION=v1.34.4 but kube-apiserver reports v1.36.3"},
	} {
		t.Run(tc.env+"/"+tc.server, func(t *testing.T) {
			t.Setenv(KubeVersionEnv, tc.env)
			d := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: tc.server}}
			err := checkServerVersion(d)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}
