// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"testing"
)

func TestValidateNodeDeployment(t *testing.T) {
	tests := []struct {
		name     string
		nodeName string
		args     []string
		wantErr  string
	}{
		{name: "off without NODE_NAME", args: []string{"--node-deployment=false"}},
		{name: "on with NODE_NAME", nodeName: "node-a", args: []string{"--node-deployment"}},
		{name: "on without NODE_NAME", args: []string{"--node-deployment"}, wantErr: "--node-deployment needs the environment variable NODE_NAME"},
		{name: "no base delay", nodeName: "node-a", args: []string{"--node-deployment", "--node-deployment-base-delay=0"},
			wantErr: "--node-deployment-base-delay must be more than 0"},
		{name: "max below base", nodeName: "node-a", args: []string{"--node-deployment", "--node-deployment-base-delay=2s", "--node-deployment-max-delay=1s"},
			wantErr: "--node-deployment-max-delay (1s) must not be less than --node-deployment-base-delay (2s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(NodeNameEnv, tc.nodeName)
			checkValidate(t, tc.args, tc.wantErr)
		})
	}
}
