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
// Every node mounts the share, one is labeled for it: the provisioning
// and delete pods run there (the ConfigMap's node-selector). A non-root pod
// writes into the claim, and its file is in the volume's directory on the
// node it ran on; deleting pod and claim runs the delete pod, and the PV and
// the directory go.
func TestFlexContainerLauncherExample(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	shareNode := c.Nodes[len(c.Nodes)-1].Name
	labelNode(t, shareNode, flexShareLabel, "true")
	ref, driverRef := pushFlexImages(t, ctx)
	install(t, "flex/deploy", ImageOverride{flexImage, ref})
	if err := c.WaitDeploymentAvailable(ctx, flexNS, flexDeployment); err != nil {
		t.Fatal(err)
	}

	example := flexExample(t, driverRef)
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
	checkFlexClaim(t, ctx, exampleNS, flexExampleClaim, shareNode)
}

// pushFlexImages pushes flex-provisioner (make push) and the example driver
// image (pushFlexExampleImage); it returns their references.
func pushFlexImages(t *testing.T, ctx context.Context) (provisioner, driver string) {
	t.Helper()
	provisioner, err := PushImage(ctx, c, "flex")
	if err != nil {
		t.Fatal(err)
	}
	driver, err = pushFlexExampleImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return provisioner, driver
}

// flexExample is flex/deploy/example as the README has users apply it:
// its ConfigMap's image pointed at the example image, driverRef.
func flexExample(t *testing.T, driverRef string) []*unstructured.Unstructured {
	t.Helper()
	example, err := Render("flex/deploy/example")
	if err != nil {
		t.Fatal(err)
	}
	// The README: "point the ConfigMap's image at yours".
	setConfigMapData(t, example, flexNS, flexExampleConfigMap, flex.ConfigImage, driverRef)
	return example
}

// checkFlexClaim waits until the claim ns/name of an example class (the
// hostdir driver's pods in flexDriverNS, on the node labeled for the share)
// is bound, and proves what users observe: the PV is the directory the
// driver made in the share, its provisioning pod ran on shareNode, a
// non-root pod writes into it and its file is in that directory on the node
// it ran on. Then it deletes pod and claim: the delete pod runs on
// shareNode, the PV and the directory go, no driver pod is left.
func checkFlexClaim(t *testing.T, ctx context.Context, ns, name, shareNode string) {
	t.Helper()
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatalf("%v\nevents in %s:%s", err, flexDriverNS, namespaceEvents(flexDriverNS))
	}
	dir := path.Join(flexShare, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		t.Fatalf("PV %s has source %+v, want the hostPath %s the example driver makes", pv.Name, pv.Spec.PersistentVolumeSource, dir)
	}
	if on := podRanOn(t, ctx, flexDriverNS, flex.PodName(flex.ActionProvision, pv.Name)); on != shareNode {
		t.Errorf("the provisioning pod ran on %s, want %s, the node labeled %s", on, shareNode, flexShareLabel)
	}

	writer := consumerPod(name+"-writer", name, c.Image(cluster.BusyboxImage))
	if err := c.RunPod(ctx, ns, writer); err != nil {
		t.Fatal(err)
	}
	log, err := c.PodLog(ctx, ns, writer.Name)
	if err != nil {
		t.Fatal(err)
	}
	ran, err := c.Client.CoreV1().Pods(ns).Get(ctx, writer.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.Node(ran.Spec.NodeName)
	if node == nil {
		t.Fatalf("the writer ran on %q, not a node of the cluster", ran.Spec.NodeName)
	}
	t.Logf("claim %s bound to %s, written by a pod on %s", name, pv.Name, node.Name)
	checkWrittenOnNode(ctx, t, node, dir, log)

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, writer.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if on := podRanOn(t, ctx, flexDriverNS, flex.PodName(flex.ActionDelete, pv.Name)); on != shareNode {
		t.Errorf("the delete pod ran on %s, want %s, the node labeled %s", on, shareNode, flexShareLabel)
	}
	for _, n := range c.Nodes {
		checkGoneFromNode(ctx, t, n, flexShare, pv.Name)
	}
	expectNoPods(t, ctx, flexDriverNS)
}

// TestFlexContainerLauncherFailures: what only real nodes show about the
// container launcher's pods, each as the claim's ProvisioningFailed event:
// a driver's Failure answer read from a real container's termination
// message; the default (restricted) securityContext enforced by the kubelet
// on an image that runs as root; an image that cannot be pulled. The pods
// run in the provisioner's namespace, which enforces restricted.
func TestFlexContainerLauncherFailures(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, example := pushFlexImages(t, ctx)
	install(t, "flex/deploy", ImageOverride{flexImage, ref})
	if err := c.WaitDeploymentAvailable(ctx, flexNS, flexDeployment); err != nil {
		t.Fatal(err)
	}
	ns := c.CreateTestNamespace(t, "flex-failures")
	for _, tc := range []struct {
		name   string
		config map[string]string
		params map[string]string
		want   []string
	}{{
		name: "driver-failure",
		config: map[string]string{flex.ConfigImage: example,
			flex.ConfigSecurityContext: `{"runAsUser": 65532, "runAsNonRoot": true, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}`},
		params: map[string]string{"root": "relative"},
		want:   []string{"failed with exit code 1: Failure: parameter root must be an absolute path, got 'relative'"},
	}, {
		// The example image has no USER: it runs as root.
		name:   "root-image-restricted",
		config: map[string]string{flex.ConfigImage: example, flex.ConfigActiveDeadline: "5"},
		want:   []string{"did not start within its deadline of 5s", "runAsNonRoot"},
	}, {
		name:   "image-not-pullable",
		config: map[string]string{flex.ConfigImage: c.Image("flex-missing:e2e"), flex.ConfigActiveDeadline: "5"},
		want:   []string{"did not start within its deadline of 5s", "flex-missing:e2e"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := framework.TestContext(t, 5*time.Minute)
			name := "flex-e2e-" + tc.name
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: flexNS, Name: name}, Data: tc.config}
			if _, err := c.Client.CoreV1().ConfigMaps(flexNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = c.Client.CoreV1().ConfigMaps(flexNS).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			params := map[string]string{flex.ParamProvisionerConfig: name}
			for k, v := range tc.params {
				params[k] = v
			}
			c.CreateTestStorageClass(t, framework.NewStorageClass(name, "kubeprov.io/flex", params))
			pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, tc.name, name, "1Gi"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			msg := waitForClaimEvent(t, ctx, pvc, "ProvisioningFailed", tc.want...)
			t.Logf("event: %s", msg)
			if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			expectNoPods(t, ctx, flexNS)
		})
	}
}

// pushFlexExampleImage builds flex/examples/image/Dockerfile and pushes it;
// it returns the reference. The Dockerfile's RUN installs jq on Debian:
// this host's jq stands in.
func pushFlexExampleImage(ctx context.Context) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	return c.PushDockerfileImage(ctx, filepath.Join(root, "flex/examples/image/Dockerfile"), filepath.Join(root, "flex/examples"), "flex-hostdir:e2e", "jq")
}

// waitForClaimEvent waits for an event with reason about the claim whose
// message contains every one of want, and returns its message.
func waitForClaimEvent(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim, reason string, want ...string) string {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, c.Client, pvc)
		if err != nil {
			return false, nil
		}
		for _, ev := range events {
			if ev.Reason != reason {
				continue
			}
			last = ev.Message
			found := true
			for _, w := range want {
				found = found && strings.Contains(ev.Message, w)
			}
			if found {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event about claim %s/%s containing %q; last one: %q", reason, pvc.Namespace, pvc.Name, want, last)
	}
	return last
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

// expectNoPods waits until the provisioner has removed its pods from ns.
func expectNoPods(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := framework.WaitForNoPods(wctx, c.Client, ns, flex.LabelManagedBy+"="+flex.ManagedBy); err != nil {
		t.Error(err)
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
