// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"time"

	"github.com/spf13/pflag"
)

// Defaults of the storage capacity flags, as in the upstream sidecar.
const (
	DefaultCapacityPollInterval  = time.Minute
	DefaultCapacityOwnerrefLevel = 1
	DefaultCapacityThreads       = 1
	DefaultKubeAPICapacityQPS    = 5
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
