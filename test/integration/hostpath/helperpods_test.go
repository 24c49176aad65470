// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/kubeletsim"
)

// Helper pods, as hostpath/pkg/hostpath names them.
const (
	helperNode      = "worker-7"
	controllerNode  = "controller-node"
	labelManagedBy  = "app.kubernetes.io/managed-by"
	helperManagedBy = "hostpath-provisioner"
)

// TestManifestsHelperPods installs deploy/helper-pods as a user would and
// runs the binary with its Deployment's arguments and environment, as its
// ServiceAccount (so the Role for pods must be enough), on a node other
// than the claims' node. kubeletsim plays the kubelet of that node: it runs
// the helper pods the provisioner creates with the provisioner binary
// itself, so that the directories are really made and removed by the
// helper subcommand. Then: a node that never runs the pod, and a planted
// pod, each end in a Warning event naming the pod.
func TestManifestsHelperPods(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	objs := render(t, "helper-pods")
	apply(t, objs)
	tmpl := podTemplate(t, objs)
	ns := tmpl.Namespace
	container := tmpl.Spec.Containers[0]
	if len(tmpl.Spec.Volumes) != 0 || !*container.SecurityContext.RunAsNonRoot || len(container.SecurityContext.Capabilities.Add) != 0 {
		t.Errorf("the helper-pods Deployment mounts %v and runs with %+v: want no node path, non-root, no capability", tmpl.Spec.Volumes, container.SecurityContext)
	}
	account := "system:serviceaccount:" + ns + ":" + tmpl.Spec.ServiceAccountName
	_, kubeconfig, err := cp.AddUser(account, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns})
	if err != nil {
		t.Fatal(err)
	}

	// The provisioner's own pod, which it reads for its image, as the
	// Deployment would have made it (on a node no kubelet runs here).
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-provisioner-0", Namespace: ns}, Spec: *tmpl.Spec.DeepCopy()}
	self.Spec.NodeName = controllerNode
	if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, self, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Pods(ns).Delete(context.Background(), self.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})

	// The image is the provisioner binary.
	sim := startHelperSim(t, ctx, map[string]kubeletsim.Image{container.Image: {Command: []string{binary(t)}}})

	pvDir := newPVDir(t)
	args := slices.Concat(container.Args, []string{"--kubeconfig=" + kubeconfig, "--pv-dir=" + pvDir, "--helper-timeout=5s"})
	p := startProvisioner(t, []string{"NODE_NAME=" + controllerNode, "POD_NAMESPACE=" + ns, "POD_NAME=" + self.Name}, args...)

	example := render(t, "example")
	apply(t, example)
	pvc := find[corev1.PersistentVolumeClaim](t, example)
	user := find[corev1.Pod](t, example)
	selectNode(ctx, t, pvc.Namespace, pvc.Name, helperNode)
	pv := bound(ctx, t, pvc.Namespace, pvc.Name)
	checkVolume(t, pv, pvDir, helperNode)

	runs := sim.Runs()
	if len(runs) != 1 {
		t.Fatalf("kubeletsim ran %d pods, want the one create pod", len(runs))
	}
	run := runs[0]
	if run.Node != helperNode || run.ExitCode != 0 || run.Pod.Name != "hostpath-create-"+pv.Name || run.Pod.Spec.Containers[0].Image != container.Image {
		t.Errorf("helper pod %s from %s ran on %s with exit code %d (%s)", run.Pod.Name, run.Pod.Spec.Containers[0].Image, run.Node, run.ExitCode, run.Message)
	}
	if vols := run.Pod.Spec.Volumes; len(vols) != 1 || vols[0].HostPath == nil || vols[0].HostPath.Path != pvDir {
		t.Errorf("helper pod volumes %+v, want only the hostPath %s", vols, pvDir)
	}
	assertNoHelperPods(ctx, t, ns)

	if err := cp.Client.CoreV1().Pods(user.Namespace).Delete(ctx, user.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletePVC(t, pvc.Namespace, pvc.Name)
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if names := entries(t, pvDir); len(names) != 0 {
		t.Errorf("--pv-dir still holds %v after the PV was deleted", names)
	}
	if runs := sim.Runs(); len(runs) != 2 || runs[1].Pod.Name != "hostpath-remove-"+pv.Name || runs[1].Node != helperNode || runs[1].ExitCode != 0 {
		t.Errorf("runs after the delete: %+v", runs)
	}
	assertNoHelperPods(ctx, t, ns)

	t.Run("node does not exist", func(t *testing.T) {
		c := framework.NewPVC(pvc.Namespace, "helper-ghost", *pvc.Spec.StorageClassName, "1Mi")
		c.Annotations = map[string]string{annSelectedNode: "ghost-node"}
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer deletePVC(t, c.Namespace, c.Name)
		ev, err := framework.WaitForEvent(ctx, cp.Client, c, "ProvisioningFailed")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "no helper pod: node ghost-node does not exist") {
			t.Errorf("event %s %q, want a Warning naming the missing node", ev.Type, ev.Message)
		}
		if _, err := cp.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("hostpath-create-pvc-%s", c.UID), metav1.GetOptions{}); err == nil {
			t.Error("a helper pod was made for a node that does not exist")
		}
	})

	t.Run("node never runs the pod", func(t *testing.T) {
		createNode(ctx, t, "silent-node", nil)
		c := framework.NewPVC(pvc.Namespace, "helper-silent", *pvc.Spec.StorageClassName, "1Mi")
		c.Annotations = map[string]string{annSelectedNode: "silent-node"}
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer deletePVC(t, c.Namespace, c.Name)
		pod := fmt.Sprintf("helper pod %s/hostpath-create-pvc-%s", ns, c.UID)
		waitForWarning(ctx, t, c, pod+" (create pvc-"+string(c.UID)+" on node silent-node) did not start within --helper-timeout 5s")
	})

	t.Run("planted pod", func(t *testing.T) {
		c := framework.NewPVC(pvc.Namespace, "helper-planted", *pvc.Spec.StorageClassName, "1Mi")
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer deletePVC(t, c.Namespace, c.Name)
		// Someone who can create pods in the namespace plants one with the
		// name the helper pod will have, mounting the node's root.
		planted := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostpath-create-pvc-%s", c.UID), Namespace: ns,
				Labels: map[string]string{labelManagedBy: helperManagedBy}},
			Spec: corev1.PodSpec{
				NodeName:      "nowhere",
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "helper", Image: container.Image, Args: []string{"helper", "create", "--root=/", "--rel=etc"}}},
				Volumes:       []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
			},
		}
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, planted, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = cp.Client.CoreV1().Pods(ns).Delete(context.Background(), planted.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}()
		selectNode(ctx, t, c.Namespace, c.Name, helperNode)
		ev, err := framework.WaitForEvent(ctx, cp.Client, c, "ProvisioningFailed")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ev.Message, planted.Name) || !strings.Contains(ev.Message, "is not the create pod this provisioner creates") {
			t.Errorf("event %q, want the planted pod refused by name", ev.Message)
		}
		if _, err := cp.Client.CoreV1().Pods(ns).Get(ctx, planted.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the planted pod is gone (%v): not ours, it must not be deleted", err)
		}
	})

	if log := p.Log(); strings.Contains(log, "forbidden") {
		t.Errorf("the ServiceAccount's RBAC is not enough: %s", firstLineWith(log, "forbidden"))
	}
	cp.ExpectNoForbidden(t, account)
}

// selectNode plays the scheduler for a WaitForFirstConsumer claim.
func selectNode(ctx context.Context, t *testing.T, ns, name, node string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annSelectedNode, node)
	if _, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func assertNoHelperPods(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + helperManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		t.Errorf("helper pod %s left behind (phase %s): it must be deleted once read", p.Name, p.Status.Phase)
	}
}

// startHelperSim runs kubeletsim with the helper node until the test ends.
func startHelperSim(t *testing.T, ctx context.Context, images map[string]kubeletsim.Image) *kubeletsim.Sim {
	t.Helper()
	sim := kubeletsim.StartForTest(t, cp.RestConfig(), images)
	if err := sim.AddNode(ctx, helperNode, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), helperNode, metav1.DeleteOptions{})
	})
	return sim
}
