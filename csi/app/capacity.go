// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/capacity"
	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
)

// Defaults of the storage capacity flags, as in the upstream sidecar.
const (
	DefaultCapacityPollInterval  = time.Minute
	DefaultCapacityOwnerrefLevel = 1
	DefaultCapacityThreads       = 1
	DefaultKubeAPICapacityQPS    = 1
	DefaultKubeAPICapacityBurst  = 5
)

// CapacityOptions are the flags of storage capacity tracking: publishing
// CSIStorageCapacity objects from the driver's GetCapacity answers.
type CapacityOptions struct {
	Enabled             bool
	PollInterval        time.Duration
	OwnerrefLevel       int
	ForImmediateBinding bool
	Threads             int
	KubeAPIQPS          float32
	KubeAPIBurst        int
}

func newCapacityOptions() CapacityOptions {
	return CapacityOptions{
		PollInterval:  DefaultCapacityPollInterval,
		OwnerrefLevel: DefaultCapacityOwnerrefLevel,
		Threads:       DefaultCapacityThreads,
		KubeAPIQPS:    DefaultKubeAPICapacityQPS,
		KubeAPIBurst:  DefaultKubeAPICapacityBurst,
	}
}

// AddFlags adds the capacity flags to fs.
func (o *CapacityOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "enable-capacity", o.Enabled,
		"Publish CSIStorageCapacity objects with the capacity the driver reports (GetCapacity) per topology segment and StorageClass.")
	fs.DurationVar(&o.PollInterval, "capacity-poll-interval", o.PollInterval, "How often the driver is asked for its capacity.")
	fs.IntVar(&o.OwnerrefLevel, "capacity-ownerref-level", o.OwnerrefLevel,
		"Owner of the CSIStorageCapacity objects, counted from the pod named by POD_NAME in NAMESPACE: -1 no owner, 0 the pod, 1 its StatefulSet or ReplicaSet, 2 a Deployment.")
	fs.BoolVar(&o.ForImmediateBinding, "capacity-for-immediate-binding", o.ForImmediateBinding,
		"Also publish capacity for StorageClasses with volumeBindingMode Immediate.")
	fs.IntVar(&o.Threads, "capacity-threads", o.Threads, "CSIStorageCapacity objects updated at once.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-capacity-qps", o.KubeAPIQPS, "Queries per second to the API server for CSIStorageCapacity objects.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-capacity-burst", o.KubeAPIBurst, "Burst of queries to the API server for CSIStorageCapacity objects.")
}

// Validate checks the capacity flags, naming each one at fault.
func (o *CapacityOptions) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if o.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("--capacity-poll-interval must be more than 0, got %v", o.PollInterval))
	}
	if o.OwnerrefLevel < -1 {
		errs = append(errs, fmt.Errorf("--capacity-ownerref-level must be -1 (no owner) or more, got %d", o.OwnerrefLevel))
	}
	if o.Threads < 1 {
		errs = append(errs, fmt.Errorf("--capacity-threads must be at least 1, got %d", o.Threads))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-capacity-qps and --kube-api-capacity-burst must be more than 0, got %v and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	return errors.Join(errs...)
}

// capacityNamespace is where the CSIStorageCapacity objects live: NAMESPACE
// (the upstream sidecar's variable), else the pod's namespace (POD_NAMESPACE
// or the service account's), else out of a cluster the namespace of the
// Lease and journal (--leader-election-namespace, or default). The second
// return says which.
func (o *Options) capacityNamespace() (string, string) {
	if ns := os.Getenv("NAMESPACE"); ns != "" {
		return ns, "NAMESPACE"
	}
	if ns, ok := controller.InClusterNamespace(); ok {
		return ns, "pod namespace"
	}
	return o.Namespace(), "leader election namespace"
}

// newCapacityController builds the storage capacity controller with a
// client of its own (--kube-api-capacity-qps/-burst) and finds the owner of
// its objects.
func (o *Options) newCapacityController(ctx context.Context, clients *cli.Clients, info connection.DriverInfo, conn grpc.ClientConnInterface,
	factory informers.SharedInformerFactory, registry prometheus.Registerer) (*capacity.Controller, error) {
	logger := klog.FromContext(ctx)
	cfg := rest.CopyConfig(clients.Config)
	cfg.QPS, cfg.Burst = o.Capacity.KubeAPIQPS, o.Capacity.KubeAPIBurst
	client, err := kubernetes.NewForConfig(cli.BuiltinConfig(cfg))
	if err != nil {
		return nil, err
	}
	namespace, from := o.capacityNamespace()
	var owner *metav1.OwnerReference
	if o.Capacity.OwnerrefLevel >= 0 {
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		ownerCtx, cancel := o.callContext(ctx)
		owner, err = capacity.Owner(ownerCtx, md, namespace, os.Getenv("POD_NAME"), o.Capacity.OwnerrefLevel)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	// With --node-deployment every instance publishes its own node's
	// segment, as upstream's do.
	var node string
	if o.NodeDeployment.Enabled {
		node = os.Getenv(NodeNameEnv)
	}
	logger.Info("Storage capacity tracking enabled", "namespace", namespace, "namespaceFrom", from, "owner", owner,
		"pollInterval", o.Capacity.PollInterval, "forImmediateBinding", o.Capacity.ForImmediateBinding, "node", node)
	return capacity.New(capacity.Config{
		NodeName:            node,
		DriverName:          info.Name,
		Driver:              csi.NewControllerClient(conn),
		Client:              client,
		Informers:           factory,
		Namespace:           namespace,
		Owner:               owner,
		Topology:            info.Capabilities.Topology,
		ForImmediateBinding: o.Capacity.ForImmediateBinding,
		PollInterval:        o.Capacity.PollInterval,
		Workers:             o.Capacity.Threads,
		Timeout:             o.callTimeout(),
		Registerer:          registry,
	})
}
