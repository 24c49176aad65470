// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	csiNS         = "csi-provisioner"
	csiDeployment = "csi-controller"
	// The names of csi/deploy/example.
	csiExampleClaim = "example-csi"
	csiExampleClass = "example-csi"
	// The driver name of csi/deploy/example's class, which the test driver
	// answers by default.
	csiExampleDriver = "example.csi.vendor.com"
)

// TestCSIProvisionAndFailover follows csi/README.md: make push of
// csi-provisioner, csi/deploy with its image and the CSI driver's replaced
// (the in-repo test driver, test/cmd/csidriver, as the second container of
// the pod, sharing the socket through an emptyDir), then csi/deploy/example.
// A pod using the claim makes the scheduler pick a node
// (WaitForFirstConsumer) and the claim is bound. Then the leader's pod is
// deleted: the other replica takes over and provisions the next claim.
func TestCSIProvisionAndFailover(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, driverRef := pushCSIImages(t, ctx)
	install(t, "csi/deploy",
		ImageOverride{"ghcr.io/kubeprov/csi-provisioner", ref},
		ImageOverride{"registry.example.com/example-csi-driver", driverRef})
	if err := c.WaitDeploymentAvailable(ctx, csiNS, csiDeployment); err != nil {
		t.Fatal(err)
	}
	install(t, "csi/deploy/example")

	consumeCSIClaim(t, ctx, exampleNS, csiExampleClaim, csiExampleDriver)
	leader, err := waitLeaderPod(ctx, csiNS)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods(csiNS).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted the leader's pod %s", leader)
	second := framework.NewPVC(exampleNS, csiExampleClaim+"-after-failover", csiExampleClass, "1Gi")
	// The example's class takes the node-stage secret's name from it.
	second.Annotations = map[string]string{"example.com/node-secret": "db-node-credentials"}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(exampleNS).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().PersistentVolumeClaims(exampleNS).Delete(context.Background(), second.Name, metav1.DeleteOptions{})
	})
	consumeCSIClaim(t, ctx, exampleNS, second.Name, csiExampleDriver)
	if now, err := waitLeaderPod(ctx, csiNS); err != nil || now == leader {
		t.Errorf("after the failover the leader is %q (%v), want another pod than %s", now, err, leader)
	}
}

// pushCSIImages pushes csi-provisioner (make push) and the in-repo CSI test
// driver (test/cmd/csidriver); it returns their references.
func pushCSIImages(t *testing.T, ctx context.Context) (provisioner, driver string) {
	t.Helper()
	provisioner, err := PushImage(ctx, c, "csi")
	if err != nil {
		t.Fatal(err)
	}
	driver, err = c.PushTestImage(ctx, "csidriver")
	if err != nil {
		t.Fatal(err)
	}
	return provisioner, driver
}

// consumeCSIClaim has a pod use the claim ns/claim, so that the scheduler
// picks a node (WaitForFirstConsumer), and waits until the claim is bound to
// a CSI volume of driver. The volume cannot be mounted (the test driver has
// no node plugin), so the pod stays ContainerCreating: it is only here to
// have the scheduler pick a node. It returns the PV and the pod's name; the
// pod is deleted when the test ends.
func consumeCSIClaim(t *testing.T, ctx context.Context, ns, claim, driver string) (*corev1.PersistentVolume, string) {
	t.Helper()
	consumer := consumerPod(claim+"-consumer", claim, c.Image(cluster.BusyboxImage))
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, consumer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Pods(ns).Delete(context.Background(), consumer.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	pvc, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, claim)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driver {
		t.Fatalf("PV %s of claim %s has source %+v, want a CSI volume of %s", pv.Name, claim, pv.Spec.PersistentVolumeSource, driver)
	}
	t.Logf("claim %s bound to %s, selected node %s", claim, pv.Name, pvc.Annotations["volume.kubernetes.io/selected-node"])
	return pv, consumer.Name
}

// install renders the kustomization at dir with the images overridden,
// applies it and uninstalls it when the test ends.
func install(t *testing.T, dir string, images ...ImageOverride) {
	t.Helper()
	objs, err := Render(dir, images...)
	if err != nil {
		t.Fatal(err)
	}
	installObjects(t, dir, objs)
}

// installObjects applies objs, rendered from the kustomization at dir, and
// uninstalls them when the test ends.
func installObjects(t *testing.T, dir string, objs []*unstructured.Unstructured) {
	t.Helper()
	mc := newManifestsClient(t)
	if err := Apply(t.Context(), mc, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Remove waits for the workloads' pods to stop.
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout+framework.DefaultCleanupTimeout)
		defer cancel()
		if err := Remove(ctx, mc, objs); err != nil {
			t.Errorf("uninstalling %s: %v", dir, err)
		}
	})
}

// renderedClaim is the claim of the given name of the kustomization at
// <repo>/<dir> (an example's), as it would be created.
func renderedClaim(t *testing.T, dir, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() == "PersistentVolumeClaim" && obj.GetName() == name {
			var pvc corev1.PersistentVolumeClaim
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pvc); err != nil {
				t.Fatal(err)
			}
			return &pvc
		}
	}
	t.Fatalf("%s has no claim %s", dir, name)
	return nil
}

// waitLeaderPod returns the pod named by the holder of the namespace's
// leader election Lease (its identity starts with the pod's name).
func waitLeaderPod(ctx context.Context, ns string) (string, error) {
	var leader string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		leases, err := c.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, l := range leases.Items {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			for _, p := range pods.Items {
				if holder != "" && strings.HasPrefix(holder, p.Name) && p.DeletionTimestamp == nil {
					leader = p.Name
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("no running pod in %s holds a Lease: %w", ns, err)
	}
	return leader, nil
}

// consumerPod is a pod that mounts the claim.
func consumerPod(name, claim, image string) *corev1.Pod {
	pod := writerPod(name, image)
	pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = claim
	return pod
}
