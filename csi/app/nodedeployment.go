// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/nodedeployment"
	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
	"github.com/kubeprov/external-storage/lib/controller"
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

// NodeNameEnv is the environment variable that names the node an instance
// runs on, set from the downward API (spec.nodeName) in a DaemonSet.
const NodeNameEnv = "NODE_NAME"

// Validate checks the flags and, with --node-deployment, that NODE_NAME is set.
func (o *NodeDeploymentOptions) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if os.Getenv(NodeNameEnv) == "" {
		errs = append(errs, fmt.Errorf("--node-deployment needs the environment variable %s naming this instance's node: "+
			"set it from the downward API (valueFrom.fieldRef.fieldPath: spec.nodeName)", NodeNameEnv))
	}
	if o.BaseDelay <= 0 {
		errs = append(errs, fmt.Errorf("--node-deployment-base-delay must be more than 0, got %v", o.BaseDelay))
	}
	if o.MaxDelay < o.BaseDelay {
		errs = append(errs, fmt.Errorf("--node-deployment-max-delay (%v) must not be less than --node-deployment-base-delay (%v)", o.MaxDelay, o.BaseDelay))
	}
	return errors.Join(errs...)
}

// nodeDeployment wraps prov for this instance's node and returns the
// controller options of a node instance: no leader election (every instance
// is active) and an in-flight journal of its own. It starts the caches it
// needs, this node's Node and the StorageClasses, and waits for them: the
// deletion guard must know the node's labels before the first volume.
func (o *NodeDeploymentOptions) nodeDeployment(ctx context.Context, client kubernetes.Interface, namespace, driver string, prov *provisioner.Provisioner, leaderElection bool) (*nodedeployment.Provisioner, []controller.Option, error) {
	nodeName := os.Getenv(NodeNameEnv)
	if leaderElection {
		klog.FromContext(ctx).Info("Ignoring --leader-election: with --node-deployment every instance is active")
	}
	ownNode := informers.NewSharedInformerFactoryWithOptions(client, controller.DefaultResyncPeriod,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
		}))
	classes := informers.NewSharedInformerFactory(client, controller.DefaultResyncPeriod)
	nodes := ownNode.Core().V1().Nodes().Lister()
	p, err := nodedeployment.New(prov, nodedeployment.Config{
		NodeName:         nodeName,
		ImmediateBinding: o.ImmediateBinding,
		BaseDelay:        o.BaseDelay,
		MaxDelay:         o.MaxDelay,
		Client:           client,
		Nodes:            nodes,
		Classes:          classes.Storage().V1().StorageClasses().Lister(),
	})
	if err != nil {
		return nil, nil, err
	}
	ownNode.Start(ctx.Done())
	classes.Start(ctx.Done())
	for _, synced := range []map[reflect.Type]bool{ownNode.WaitForCacheSync(ctx.Done()), classes.WaitForCacheSync(ctx.Done())} {
		for typ, ok := range synced {
			if !ok {
				return nil, nil, fmt.Errorf("waiting for the %v cache: %w", typ, context.Cause(ctx))
			}
		}
	}
	if _, err := nodes.Get(nodeName); err != nil {
		klog.FromContext(ctx).Error(err, "This instance's Node is not known yet: it deletes no volume until it is", "node", nodeName)
	}
	klog.FromContext(ctx).Info("Distributed provisioning", "node", nodeName, "immediateBinding", o.ImmediateBinding)
	return p, []controller.Option{
		controller.WithoutLeaderElection(),
		controller.WithJournal(namespace, controller.JournalName(driver, nodeName)),
	}, nil
}
