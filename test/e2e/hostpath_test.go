// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

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
	ref, err := PushImage(ctx, c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := manifests.NewClient(c.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	install, err := Render("hostpath/deploy/single-node", ImageOverride{hostpathImage, ref})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, mc, install); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := Remove(ctx, mc, install); err != nil {
			t.Errorf("uninstalling: %v", err)
		}
	})
	if err := c.WaitDeploymentAvailable(ctx, "kubeprov-hostpath", "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}

	example, err := Render("hostpath/deploy/example", ImageOverride{"busybox", c.Image(cluster.BusyboxImage)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, mc, example); err != nil {
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

	if err := Remove(ctx, mc, example); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if out, err := node.Exec(ctx, "ls", "-A", hostpathDir); err != nil || strings.Contains(string(out), pv.Name) {
		t.Errorf("after the PV was deleted, %s on the node holds %q (%v), want no %s", hostpathDir, out, err, pv.Name)
	}
}
