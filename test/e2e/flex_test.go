// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	flexImage      = "ghcr.io/kubeprov/flex-provisioner"
	flexNS         = "flex-provisioner"
	flexDeployment = "flex-provisioner"
	// The names of flex/deploy/example.
	flexExampleClaim     = "flex-example"
	flexExampleConfigMap = "flex-hostdir"
	flexDriverNS         = "flex-hostdir"
	// flexShare is the share every node of the example mounts (its
	// ConfigMap's host-path, the class's root); the cluster's nodes mount
	// one directory there (main_test.go).
	flexShare = "/srv/flex-volumes"
	// flexShareLabel marks the nodes that mount the share: the example's
	// node-selector.
	flexShareLabel = "storage.example.com/share"
)

// TestFlexContainerLauncherExample follows flex/README.md's quick start:
// make push of flex-provisioner, flex/deploy with its image, and
// flex/deploy/example, whose ConfigMap names the example image built from
// flex/examples/image/Dockerfile (the hostdir driver behind the entrypoint).
// The provisioning pod runs on a node of the share; a non-root pod writes
// into the claim, and its file is in the volume's directory on the node;
// deleting pod and claim runs the delete pod, and the PV and the directory go.
func TestFlexContainerLauncherExample(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	for _, n := range c.Nodes {
		labelNode(t, n.Name, flexShareLabel, "true")
	}
	ref, err := PushImage(ctx, c, "flex")
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The Dockerfile's RUN installs jq on Debian; this host's jq stands in.
	driverRef, err := c.PushDockerfileImage(ctx, filepath.Join(root, "flex/examples/image/Dockerfile"), filepath.Join(root, "flex/examples"), "flex-hostdir:e2e", "jq")
	if err != nil {
		t.Fatal(err)
	}
	install(t, "flex/deploy", ImageOverride{flexImage, ref})
	if err := c.WaitDeploymentAvailable(ctx, flexNS, flexDeployment); err != nil {
		t.Fatal(err)
	}

	example, err := Render("flex/deploy/example")
	if err != nil {
		t.Fatal(err)
	}
	// The README: "point the ConfigMap's image at yours".
	setConfigMapData(t, example, flexNS, flexExampleConfigMap, flex.ConfigImage, driverRef)
	mc := newManifestsClient(t)
	if err := Apply(ctx, mc, example); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := Remove(ctx, mc, example); err != nil {
			t.Errorf("uninstalling flex/deploy/example: %v", err)
		}
	})

	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, exampleNS, flexExampleClaim)
	if err != nil {
		t.Fatalf("%v\nevents in %s:%s", err, flexDriverNS, namespaceEvents(flexDriverNS))
	}
	dir := path.Join(flexShare, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		t.Fatalf("PV %s has source %+v, want the hostPath %s the example driver makes", pv.Name, pv.Spec.PersistentVolumeSource, dir)
	}
	provisionNode := podRanOn(t, ctx, flexDriverNS, flex.PodName(flex.ActionProvision, pv.Name))
	t.Logf("claim %s bound to %s, provisioned by a pod on %s", flexExampleClaim, pv.Name, provisionNode)

	writer := consumerPod(flexExampleClaim+"-writer", flexExampleClaim, c.Image(cluster.BusyboxImage))
	if err := c.RunPod(ctx, exampleNS, writer); err != nil {
		t.Fatal(err)
	}
	log, err := c.PodLog(ctx, exampleNS, writer.Name)
	if err != nil {
		t.Fatal(err)
	}
	ran, err := c.Client.CoreV1().Pods(exampleNS).Get(ctx, writer.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.Node(ran.Spec.NodeName)
	if node == nil {
		t.Fatalf("the writer ran on %q, not a node of the cluster", ran.Spec.NodeName)
	}
	onNode, err := node.Exec(ctx, "cat", path.Join(dir, "SUCCESS"))
	if err != nil {
		t.Fatalf("the pod's file is not in the volume's directory on %s: %v", node.Name, err)
	}
	if strings.TrimSpace(string(onNode)) == "" || string(onNode) != log {
		t.Errorf("SUCCESS on %s holds %q, the pod printed %q", node.Name, onNode, log)
	}

	if err := c.Client.CoreV1().Pods(exampleNS).Delete(ctx, writer.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(exampleNS).Delete(ctx, flexExampleClaim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	deleteNode := podRanOn(t, ctx, flexDriverNS, flex.PodName(flex.ActionDelete, pv.Name))
	t.Logf("PV %s deleted by a pod on %s", pv.Name, deleteNode)
	for _, n := range c.Nodes {
		if out, err := n.Exec(ctx, "ls", "-A", flexShare); err != nil || strings.Contains(string(out), pv.Name) {
			t.Errorf("after PV %s was deleted, %s on %s holds %q (%v)", pv.Name, flexShare, n.Name, out, err)
		}
	}
	expectNoPods(t, ctx, flexDriverNS)
}

// namespaceEvents lists the events in ns, for error messages: those of
// the driver pods, which are gone by then.
func namespaceEvents(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	s := ""
	for _, e := range events.Items {
		s += fmt.Sprintf("\n  %s %s/%s %s (x%d): %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, max(e.Count, 1), e.Message)
	}
	return s
}

// setConfigMapData sets a key of a ConfigMap among objs, as a user's
// kustomization patch would.
func setConfigMapData(t *testing.T, objs []*unstructured.Unstructured, ns, name, key, value string) {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" && obj.GetNamespace() == ns && obj.GetName() == name {
			if err := unstructured.SetNestedField(obj.Object, value, "data", key); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no ConfigMap %s/%s", ns, name)
}

// podRanOn waits until the pod has been scheduled and the kubelet has
// started its container (their events, which outlive the pod), and returns
// the node.
func podRanOn(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	scheduled, err := framework.WaitForEvent(ctx, c.Client, pod, "Scheduled")
	if err != nil {
		t.Fatal(err)
	}
	started, err := framework.WaitForEvent(ctx, c.Client, pod, "Started")
	if err != nil {
		t.Fatal(err)
	}
	node := started.Source.Host
	if node == "" {
		node = started.ReportingInstance
	}
	if c.Node(node) == nil || !strings.HasSuffix(scheduled.Message, " to "+node) {
		t.Errorf("pod %s/%s: scheduled %q, started by %q, want a node of the cluster", ns, name, scheduled.Message, node)
	}
	return node
}

// expectNoPods waits until ns has no pods left: the provisioner deletes
// each of its pods once it has read the answer.
func expectNoPods(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name+" ("+string(p.Status.Phase)+")")
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("pods left in %s: %v", ns, left)
	}
}

// labelNode sets a label on a node until the test ends.
func labelNode(t *testing.T, node, key, value string) {
	t.Helper()
	set := func(ctx context.Context, v *string) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: v}}})
		if err != nil {
			return err
		}
		_, err = c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := set(t.Context(), &value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := set(ctx, nil); err != nil {
			t.Errorf("removing label %s from %s: %v", key, node, err)
		}
	})
}
