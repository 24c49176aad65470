// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/discovery"
)

// KubeVersionEnv names the environment variable that picks the Kubernetes
// version the tests run against (e.g. v1.34.4, one of the supported ones in
// hack/lib/versions.sh). hack/controlplane.sh and hack/node.sh, which the
// framework runs, read it too and build that version into a cache directory of
// its own; unset, they build the newest supported version.
const KubeVersionEnv = "KUBEPROV_KUBE_VERSION"

// WantedKubeVersion returns the version KubeVersionEnv asks for, with its
// leading "v", or "" when it is unset.
func WantedKubeVersion() string {
	v := strings.TrimSpace(os.Getenv(KubeVersionEnv))
	if v == "" || strings.HasPrefix(v, "v") {
		return v
	}
	return "v" + v
}

// checkServerVersion fails when KubeVersionEnv asks for a version other than
// the one the running kube-apiserver reports: a suite meant for the oldest
// supported minor must never pass on the newest by mistake.
func checkServerVersion(d discovery.ServerVersionInterface) error {
	want := WantedKubeVersion()
	if want == "" {
		return nil
	}
	info, err := d.ServerVersion()
	if err != nil {
		return fmt.Errorf("asking kube-apiserver for its version: %w", err)
	}
	if info.GitVersion != want {
		return fmt.Errorf("%s=%s but kube-apiserver reports %s", KubeVersionEnv, want, info.GitVersion)
	}
	return nil
}
