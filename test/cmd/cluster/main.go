// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cluster is `make cluster`: it starts a cluster with real nodes
// (package cluster), prints how to reach it and debug its pods, and keeps
// it running until Ctrl-C, then stops everything it started. It needs root.
//
//	cd test && go run ./cmd/cluster [--nodes N]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprov/external-storage/test/cluster"
)

func main() {
	nodes := flag.Int("nodes", 1, "number of nodes")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // envtest's; our own lines say what happens
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	say("Starting a cluster with %d real node(s) (the first run builds everything: about 20 min)...", *nodes)
	c, err := cluster.Start(ctx, cluster.Options{Nodes: *nodes, Log: func(format string, args ...any) { say("  "+format, args...) }})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start the cluster: %v\n", err)
		os.Exit(1)
	}
	say("\nThe cluster runs. In another terminal:\n\n  export KUBECONFIG=%s\n  kubectl get nodes -o wide\n", c.KubeconfigPath)
	say("Images: push to %s (make push REGISTRY=%s/kubeprov TAG=dev); %s, %s and %s are there.",
		c.Registry, c.Registry, c.Image(cluster.PauseImage), c.Image(cluster.BusyboxImage), c.Image(cluster.InclusterImage))
	say("Logs: control plane in %s, kube-scheduler %s", c.Dir, c.SchedulerLog)
	for _, n := range c.Nodes {
		say("Node %s (%s): kubelet %s, containerd %s", n.Name, n.IP, n.KubeletLog, n.ContainerdLog)
		say("  inside it:  nsenter -t %d -m -n sh", n.HolderPid())
		say("  containers: %s/ctr --address %s -n k8s.io containers ls", c.NodeBinDir, n.ContainerdSocket)
	}
	say("\nPress Ctrl-C to stop everything.")
	<-ctx.Done()
	say("\nStopping the cluster...")
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the cluster: %v\n", err)
		os.Exit(1)
	}
	say("Stopped.")
}
