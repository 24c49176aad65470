// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"time"

	"github.com/spf13/pflag"
)

// Defaults of the distributed provisioning flags, as in the upstream sidecar.
const (
	DefaultNodeDeploymentImmediateBinding = true
	DefaultNodeDeploymentBaseDelay        = 20 * time.Second
	DefaultNodeDeploymentMaxDelay         = 60 * time.Second
)

// NodeDeploymentOptions are the flags of distributed provisioning: one
// instance per node (a DaemonSet), each provisioning the claims of its node.
type NodeDeploymentOptions struct {
	Enabled          bool
	ImmediateBinding bool
	BaseDelay        time.Duration
	MaxDelay         time.Duration
}

func newNodeDeploymentOptions() NodeDeploymentOptions {
	return NodeDeploymentOptions{
		ImmediateBinding: DefaultNodeDeploymentImmediateBinding,
		BaseDelay:        DefaultNodeDeploymentBaseDelay,
		MaxDelay:         DefaultNodeDeploymentMaxDelay,
	}
}

// AddFlags adds the distributed provisioning flags to fs.
func (o *NodeDeploymentOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "node-deployment", o.Enabled,
		"Run one instance per node (NODE_NAME names it): each provisions only claims selected for its node, and Immediate claims as described by --node-deployment-immediate-binding.")
	fs.BoolVar(&o.ImmediateBinding, "node-deployment-immediate-binding", o.ImmediateBinding,
		"With --node-deployment, also provision Immediate claims: every instance tries after a delay, the first to claim one wins.")
	fs.DurationVar(&o.BaseDelay, "node-deployment-base-delay", o.BaseDelay,
		"With --node-deployment, the delay before an instance tries an Immediate claim; it grows with each failure.")
	fs.DurationVar(&o.MaxDelay, "node-deployment-max-delay", o.MaxDelay,
		"With --node-deployment, the longest delay before an instance tries an Immediate claim.")
}
