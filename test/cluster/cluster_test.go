// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

var c *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.RunMain(m, cluster.Options{Nodes: 1}, func(started *cluster.Cluster) { c = started }))
}

// TestRestrictedPodRuns: a node is Ready (Start checked it) and a pod that
// the restricted Pod Security Standard admits runs to completion on it,
// reaches the apiserver with its service account, and its log can be read
// through the apiserver from the kubelet.
func TestRestrictedPodRuns(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := c.CreateTestNamespace(t, "smoke")
	if err := c.EnforceRestricted(ctx, ns); err != nil {
		t.Fatal(err)
	}
	pod := cluster.RestrictedPod("smoke", c.Image(cluster.InclusterImage), nil)
	if err := c.RunPod(ctx, ns, pod); err != nil {
		t.Fatal(err)
	}
	log, err := c.PodLog(ctx, ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "uid 65532 reached apiserver v1.36.3") {
		t.Errorf("pod log %q does not say it reached the apiserver as uid 65532", log)
	}
	got, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != c.Nodes[0].Name {
		t.Errorf("pod ran on %q, want the scheduler to have picked %q", got.Spec.NodeName, c.Nodes[0].Name)
	}
}
