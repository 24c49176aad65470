// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

// The labels hostpath's helper pods carry (hostpath/README.md, "Helper pods").
const (
	helperLabelManagedBy = "app.kubernetes.io/managed-by"
	helperManagedBy      = "hostpath-provisioner"
	helperLabelAction    = "hostpath.kubeprov.io/helper"
)

// TestHostpathHelperPods follows the README's helper-pods mode on two real
// nodes: deploy/helper-pods (one Deployment that mounts no node path, and
// its WaitForFirstConsumer class), a claim and the README's writer pod
// asked onto the node the provisioner does not run on. That node has no
// /var/lib/hostpath-provisioner yet: the helper pod's hostPath makes it.
// A create pod runs there under the
// real kubelet, in the provisioner's namespace, with the README's security
// context, succeeds and is deleted; the pod's file is in the volume's
// directory on that node only. Deleting the pod and the claim runs a
// remove pod there: the PV and the directory go, no helper pod is left.
func TestHostpathHelperPods(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	if len(c.Nodes) < 2 {
		t.Fatalf("the cluster has %d node(s), this test needs 2", len(c.Nodes))
	}
	installHostpath(t, "hostpath/deploy/helper-pods")
	if err := c.WaitDeploymentAvailable(ctx, hostpathNS, "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}
	// The namespace's Pod Security level, which admits the helper pods
	// (hostPath volumes, root): the README says it must be privileged.
	nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, hostpathNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if level := nsObj.Labels["pod-security.kubernetes.io/enforce"]; level != "privileged" {
		t.Errorf("namespace %s enforces Pod Security level %q, the README says privileged", hostpathNS, level)
	}

	// The provisioner's node, and the other one, where the claim's pod goes.
	provisioners, err := c.Client.CoreV1().Pods(hostpathNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=hostpath-provisioner"})
	if err != nil {
		t.Fatal(err)
	}
	if len(provisioners.Items) != 1 {
		t.Fatalf("%d provisioner pods, want the Deployment's one", len(provisioners.Items))
	}
	provisionerPod := provisioners.Items[0]
	if slices.ContainsFunc(provisionerPod.Spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil }) {
		t.Errorf("the provisioner pod mounts a node path: %+v", provisionerPod.Spec.Volumes)
	}
	var node, other *cluster.Node
	for _, n := range c.Nodes {
		if n.Name == provisionerPod.Spec.NodeName {
			other = n
		} else if node == nil {
			node = n
		}
	}
	if node == nil || other == nil {
		t.Fatalf("the provisioner runs on %q; want it on one of the nodes and a node without it", provisionerPod.Spec.NodeName)
	}
	t.Logf("provisioner on %s, claim's pod on %s", other.Name, node.Name)

	helpers := watchHelperPods(ctx, t, hostpathNS)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		log, err := c.PodLog(ctx, hostpathNS, provisionerPod.Name)
		t.Logf("provisioner log (%v):\n%s", err, log)
		t.Logf("helper pods seen:\n%s", helpers.describe())
	})

	ns := c.CreateTestNamespace(t, "helper-pods")
	const name = "helper-pods"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, "hostpath", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := writerPod(name, c.Image(cluster.BusyboxImage))
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node.Name}
	// Until the namespace's default ServiceAccount exists, pods are refused.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}

	// A fresh node has no /var/lib/hostpath-provisioner: the helper pod's
	// hostPath (DirectoryOrCreate) makes it, as the DaemonSet modes do. An
	// earlier test of the suite may have made it (empty once its volumes
	// went): rmdir removes only an empty directory, so a leftover volume
	// fails here instead of being lost.
	if _, err := node.Exec(ctx, "ls", "-d", hostpathDir); err == nil {
		if out, err := node.Exec(ctx, "rmdir", hostpathDir); err != nil {
			t.Fatalf("%s on %s is not empty (%s, %v): an earlier test left a volume there", hostpathDir, node.Name, out, err)
		}
	}
	if err := c.WaitPodPhase(ctx, ns, name, corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != hostpathDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, hostpathDir)
	}

	create := helpers.waitGone(ctx, t, "hostpath-create-"+pv.Name)
	checkHelperRun(t, create, "create", node.Name)

	log, err := c.PodLog(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	checkWrittenOnNode(ctx, t, node, pv.Spec.HostPath.Path, log)
	// Made by the helper as root, with --dir-mode (0777).
	if st, err := node.Exec(ctx, "stat", "-c", "%u:%g %a", pv.Spec.HostPath.Path); err != nil || strings.TrimSpace(string(st)) != "0:0 777" {
		t.Errorf("the volume's directory on %s is %q (%v), want root's with mode 777", node.Name, st, err)
	}
	checkNeverOnNode(ctx, t, other, hostpathDir, pv.Name)

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	remove := helpers.waitGone(ctx, t, "hostpath-remove-"+pv.Name)
	checkHelperRun(t, remove, "remove", node.Name)
	checkGoneFromNode(ctx, t, node, hostpathDir, pv.Name)

	left, err := c.Client.CoreV1().Pods(hostpathNS).List(ctx, metav1.ListOptions{LabelSelector: helperLabelManagedBy + "=" + helperManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left.Items {
		t.Errorf("helper pod %s left behind (phase %s)", p.Name, p.Status.Phase)
	}
	if names := helpers.names(); len(names) != 2 {
		t.Errorf("helper pods seen: %v, want one create and one remove pod", names)
	}
}

// checkHelperRun checks a helper pod as last seen before its deletion: the
// pod the README describes, run on node by the real kubelet to success.
func checkHelperRun(t *testing.T, p *corev1.Pod, action, node string) {
	t.Helper()
	if p.Labels[helperLabelAction] != action || p.Spec.NodeName != node {
		t.Errorf("helper pod %s: action %q on node %q, want %s on %s", p.Name, p.Labels[helperLabelAction], p.Spec.NodeName, action, node)
	}
	if p.Status.Phase != corev1.PodSucceeded || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("helper pod %s ended in phase %s with %+v, want Succeeded", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 0 || term.ContainerID == "" {
		t.Errorf("helper pod %s: container state %+v, want terminated by the runtime with exit code 0", p.Name, p.Status.ContainerStatuses[0].State)
	} else {
		t.Logf("helper pod %s on %s: %s, exit code %d, message %q", p.Name, node, term.Reason, term.ExitCode, term.Message)
	}
	if action == "create" && (term == nil || !strings.Contains(term.Message, `"root":"`+hostpathDir+`"`)) {
		t.Errorf("helper pod %s: termination message %q, want the root %s", p.Name, term.Message, hostpathDir)
	}
	if p.Spec.ServiceAccountName != "" && (p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken) {
		t.Errorf("helper pod %s mounts a service account token", p.Name)
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath == nil || !strings.HasPrefix(v.HostPath.Path, hostpathDir) {
			t.Errorf("helper pod %s has volume %+v, want only hostPaths under %s", p.Name, v, hostpathDir)
		}
	}
	sc := p.Spec.Containers[0].SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"DAC_OVERRIDE", "FOWNER"}) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("helper pod %s runs with %+v, want the README's security context", p.Name, sc)
	}
	if p.Spec.HostNetwork || p.Spec.HostPID || p.Spec.HostIPC {
		t.Errorf("helper pod %s uses a host namespace", p.Name)
	}
}

// helperPods records the helper pods of a namespace from a watch: each
// pod as last seen, and whether it was deleted.
type helperPods struct {
	mu      sync.Mutex
	last    map[string]*corev1.Pod
	deleted map[string]bool
	err     error
}

// watchHelperPods watches the helper pods of ns until the test ends.
func watchHelperPods(ctx context.Context, t *testing.T, ns string) *helperPods {
	t.Helper()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: helperLabelManagedBy + "=" + helperManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	h := &helperPods{last: map[string]*corev1.Pod{}, deleted: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			h.mu.Lock()
			switch p := ev.Object.(type) {
			case *corev1.Pod:
				prev := h.last[p.Name]
				if prev != nil && prev.UID != p.UID {
					// A later attempt's pod of the same name.
					prev = nil
					h.deleted[p.Name] = false
				}
				if ev.Type == watch.Deleted {
					h.deleted[p.Name] = true
				}
				// The deleted object's status can be older than the last
				// update seen: keep the terminal one.
				if prev == nil || !isPodTerminal(prev) {
					h.last[p.Name] = p
				}
			case *metav1.Status:
				h.err = fmt.Errorf("watching helper pods: %s", p.Message)
			}
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return h
}

func isPodTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// waitGone waits until the helper pod name has been seen and deleted, and
// returns it as last seen.
func (h *helperPods) waitGone(ctx context.Context, t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		last = h.last[name]
		return last != nil && h.deleted[name], h.err
	})
	if err != nil {
		if last == nil {
			err = errors.Join(err, fmt.Errorf("helper pod %s/%s was never seen; seen: %v", hostpathNS, name, h.names()))
		} else {
			err = errors.Join(err, fmt.Errorf("helper pod %s/%s not deleted; last seen in phase %s: %+v", hostpathNS, name, last.Status.Phase, last.Status.ContainerStatuses))
		}
		t.Fatal(err)
	}
	return last
}

// describe lists the helper pods seen, as last seen, for failure messages.
func (h *helperPods) describe() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for name, p := range h.last {
		fmt.Fprintf(&b, "  %s on %q: phase %s, deleted %t, %+v\n", name, p.Spec.NodeName, p.Status.Phase, h.deleted[name], p.Status.ContainerStatuses)
	}
	return b.String()
}

// names are the helper pods seen, sorted.
func (h *helperPods) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var names []string
	for n := range h.last {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
