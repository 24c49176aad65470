// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/hostpath/pkg/capacity"
	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
	"github.com/kubeprov/external-storage/hostpath/pkg/resize"
	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
)

// BinaryName is the name of the binary, its image and its user agent.
const BinaryName = "hostpath-provisioner"

// NewCommand returns the hostpath-provisioner command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := cli.NewCommand(BinaryName, "Provisions PersistentVolumes as directories on a node's filesystem", o)
	cmd.AddCommand(newHelperCommand())
	return cmd
}

// Run provisions until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	clients, err := o.NewClients(BinaryName)
	if err != nil {
		return err
	}
	var dirs hostpath.Dirs
	if o.HelperPods {
		if dirs, err = o.helperDirs(ctx, clients.Kube); err != nil {
			return err
		}
	}
	// The provisioner compares a new volume's directory with the other
	// volumes': the controller's informers, shared, keep their paths.
	factory := controller.NewInformerFactory(clients.Kube, controller.DefaultResyncPeriod, hostpath.KeepVolume)
	p, err := hostpath.New(hostpath.Config{
		Dir: o.PVDir, ConfigFile: o.Config, ReloadInterval: o.ConfigReloadInterval, NodeLabelKey: o.NodeLabelKey,
		Node: o.NodeName, DirMode: o.DirMode, NodeLocal: o.NodeLocal, Dirs: dirs,
		Volumes: factory.Core().V1().PersistentVolumes().Lister(),
	})
	if err != nil {
		return err
	}
	if o.Config == "" && !o.HelperPods {
		// Pods reach their volumes through bind mounts, never through --pv-dir.
		if err := os.MkdirAll(o.PVDir, 0o750); err != nil {
			return fmt.Errorf("--pv-dir: %w", err)
		}
	}
	enforcement := p.Enforcement()
	go p.WatchConfig(ctx)
	registry := prometheus.NewRegistry()
	registry.MustRegister(p.Collector())
	ro := cli.RunOptions{
		Ready:      map[string]httpendpoint.Check{"pv-dir": o.checkPVDir},
		Controller: []controller.Option{controller.WithInformerFactory(factory)},
		Registry:   registry,
	}
	if o.EnableResizer {
		task, err := o.resizeTask(ctx, clients, p)
		if err != nil {
			return err
		}
		ro.Controller = append(ro.Controller, controller.WithActiveTask(task))
	}
	if o.EnableCapacity {
		task, err := o.capacityTask(ctx, clients.Kube, factory, p, registry)
		if err != nil {
			return err
		}
		ro.Controller = append(ro.Controller, task)
	}
	if o.NodeLocal {
		// Instances on different nodes run side by side, each with its own
		// in-flight operations: they must not share one journal.
		ro.Controller = append(ro.Controller, controller.WithJournal(o.Namespace(), controller.JournalName(o.Provisioner, o.NodeName)))
	}
	klog.FromContext(ctx).Info("Starting", "provisioner", o.Provisioner, "node", o.NodeName, "pvDir", o.PVDir, "config", o.Config,
		"dirMode", fmt.Sprintf("%#o", uint32(o.DirMode)), "nodeLocal", o.NodeLocal, "helperPods", o.HelperPods, "resizer", o.EnableResizer)
	for _, path := range slices.Sorted(maps.Keys(enforcement)) {
		klog.FromContext(ctx).Info("Volume sizes", "path", path, "are", enforcement[path])
	}
	return o.Common.Run(ctx, clients, o.Provisioner, p, ro)
}

// resizeTask returns the resizer of the volumes p owns, as a task of the
// active instance: with leader election only the leader resizes; with
// --node-local every node's instance resizes its node's volumes. Its
// informers are its own: the controller's cache leaves bound claims out.
func (o *Options) resizeTask(ctx context.Context, clients *cli.Clients, p *hostpath.Provisioner) (func(context.Context), error) {
	instance, err := os.Hostname()
	if err != nil || instance == "" {
		instance = o.NodeName
	}
	r, err := resize.New(clients.Kube, resize.NewInformerFactory(clients.Kube, controller.DefaultResyncPeriod), p,
		resize.NewEventRecorder(ctx, clients.Events, o.Provisioner, instance),
		resize.WithProvisionerNames(o.Provisioner), resize.WithRetryInterval(o.RetryIntervalStart, o.RetryIntervalMax),
		resize.WithExpandTimeout(o.Timeout))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		if err := r.Run(ctx, o.WorkerThreads); err != nil {
			klog.FromContext(ctx).Error(err, "Resizer failed")
		}
	}, nil
}

// The provisioner tells the capacity publisher what it needs.
var _ capacity.Source = (*hostpath.Provisioner)(nil)

// capacityTask is the controller option that publishes CSIStorageCapacity
// objects (--enable-capacity) while this instance is the active one: the
// leader, or with --node-local every instance, each for its own node.
func (o *Options) capacityTask(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory,
	p *hostpath.Provisioner, registry prometheus.Registerer) (controller.Option, error) {
	var node string
	if o.NodeLocal {
		node = o.NodeName
	}
	publisher, err := capacity.New(capacity.Config{
		Provisioner: o.Provisioner, Namespace: o.Namespace(), Client: client, Informers: factory, Source: p,
		Node: node, NodeLabelKey: o.NodeLabelKey, PollInterval: o.CapacityPollInterval, Registerer: registry,
	})
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Storage capacity tracking enabled: kube-scheduler reads it only if a CSIDriver named after the provisioner has storageCapacity: true",
		"namespace", o.Namespace(), "csiDriver", o.Provisioner, "pollInterval", o.CapacityPollInterval)
	return controller.WithActiveTask(func(ctx context.Context) {
		if err := publisher.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Storage capacity tracking stopped")
		}
	}), nil
}

// checkPVDir fails readiness while --pv-dir is not a directory (for example
// when the hostPath mount of the pod went wrong).
func (o *Options) checkPVDir(*http.Request) error {
	if o.Config != "" || o.HelperPods {
		return nil
	}
	fi, err := os.Stat(o.PVDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("--pv-dir %s is not a directory", o.PVDir)
	}
	return nil
}

// helperDirs configures helper pods: their image is this pod's own unless
// --helper-image says otherwise, so that a kustomize or Helm image override
// reaches them too.
func (o *Options) helperDirs(ctx context.Context, client kubernetes.Interface) (*hostpath.HelperDirs, error) {
	ns := o.HelperNamespace
	if ns == "" {
		ns = o.Namespace()
	}
	image := o.HelperImage
	if image == "" {
		name := os.Getenv("POD_NAME")
		if name == "" {
			return nil, errors.New("--helper-pods needs --helper-image, or POD_NAME (downward API metadata.name) to use this pod's own image")
		}
		pod, err := client.CoreV1().Pods(o.Namespace()).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading this pod %s/%s for its image (or set --helper-image): %w", o.Namespace(), name, err)
		}
		image = ownImage(pod)
		if image == "" {
			return nil, fmt.Errorf("pod %s/%s has no container named %s: set --helper-image", o.Namespace(), name, BinaryName)
		}
	}
	tolerations, err := o.helperTolerations()
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Helper pods", "namespace", ns, "image", image, "timeout", o.HelperTimeout,
		"podsPerNamespace", o.HelperPodsPerNS, "nodeSelector", o.HelperNodeSelector, "tolerations", o.HelperTolerations)
	return hostpath.NewHelperDirs(hostpath.HelperConfig{
		Client: client, Namespace: ns, Image: image, Timeout: o.HelperTimeout, ImagePullPolicy: corev1.PullPolicy(o.HelperPullPolicy),
		PodsPerNamespace: o.HelperPodsPerNS, NodeSelector: o.HelperNodeSelector, Tolerations: tolerations,
	})
}

// ownImage is the image of the provisioner's container in its pod.
func ownImage(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == BinaryName || len(pod.Spec.Containers) == 1 {
			return c.Image
		}
	}
	return ""
}
