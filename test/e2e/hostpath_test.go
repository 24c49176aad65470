// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

const (
	hostpathImage = "ghcr.io/kubeprov/hostpath-provisioner"
	// hostpathDir is where the README says volumes live on the node.
	hostpathDir = "/var/lib/hostpath-provisioner"
	// The names of hostpath/deploy/example.
	exampleName = "hostpath-example"
	exampleNS   = "default"
)

// TestHostpathSingleNode follows hostpath/README.md on a one-node cluster:
// make push, apply deploy/single-node with the image overridden, apply
// deploy/example (a claim and a non-root pod writing /mnt/SUCCESS), then
// look for the file in the volume's directory on the node; delete the pod
// and the claim: the PV and the directory go.
func TestHostpathSingleNode(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, err := pushImage(ctx, c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := manifests.NewClient(c.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	install, err := render("hostpath/deploy/single-node", imageOverride{hostpathImage, ref})
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(ctx, mc, install); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := remove(ctx, mc, install); err != nil {
			t.Errorf("uninstalling: %v", err)
		}
	})
	if err := waitDeploymentAvailable(ctx, c, "kubeprov-hostpath", "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}

	example, err := render("hostpath/deploy/example", imageOverride{"busybox", c.Image(cluster.BusyboxImage)})
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(ctx, mc, example); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPodPhase(ctx, exampleNS, exampleName, "Succeeded"); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, exampleNS, exampleName)
	if err != nil {
		t.Fatal(err)
	}
	log, err := c.PodLog(ctx, exampleNS, exampleName)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != hostpathDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, hostpathDir)
	}
	node := c.Nodes[0]
	onNode, err := node.Exec(ctx, "cat", path.Join(pv.Spec.HostPath.Path, "SUCCESS"))
	if err != nil {
		t.Fatalf("the pod's file is not in the volume's directory on the node: %v", err)
	}
	if strings.TrimSpace(string(onNode)) == "" || string(onNode) != log {
		t.Errorf("SUCCESS on the node holds %q, the pod printed %q", onNode, log)
	}

	if err := remove(ctx, mc, example); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if out, err := node.Exec(ctx, "ls", "-A", hostpathDir); err != nil || strings.Contains(string(out), pv.Name) {
		t.Errorf("after the PV was deleted, %s on the node holds %q (%v), want no %s", hostpathDir, out, err, pv.Name)
	}
}

// waitDeploymentAvailable waits until every replica of the Deployment is
// available (its readiness probe passed).
func waitDeploymentAvailable(ctx context.Context, c *cluster.Cluster, ns, name string) error {
	var last *appsv1.Deployment
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = d
		return d.Status.AvailableReplicas > 0 && d.Status.AvailableReplicas == d.Status.Replicas, nil
	})
	if err != nil {
		pods, _ := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		var states []string
		if pods != nil {
			for _, p := range pods.Items {
				states = append(states, p.Name+": "+string(p.Status.Phase)+" "+p.Status.Message)
			}
		}
		var status any
		if last != nil {
			status = last.Status
		}
		return fmt.Errorf("Deployment %s/%s is not available: %w (status %+v; pods %v)", ns, name, err, status, states)
	}
	return nil
}
