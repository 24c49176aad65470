// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"path"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/helm"
)

// TestHostpathChart installs charts/hostpath as helm install does, with
// its defaults (node-local mode: a DaemonSet, a WaitForFirstConsumer class)
// and only the image overridden, into a fresh namespace labeled as its
// values.yaml asks. A pod writes into a claim of the release's class: the
// claim binds, the file is in the volume's directory on the node the pod
// ran on. Deleting the claim deletes the PV and the directory; uninstalling
// (deleting what the chart rendered, as helm uninstall does) leaves none of
// the release's objects or pods.
func TestHostpathChart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, err := PushImage(ctx, c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	repository, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	repository = ref[:strings.LastIndex(ref, "/")+1] + repository

	ns := c.CreateTestNamespace(t, chartNamespacePrefix+"hostpath")
	privileged := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`)
	if _, err := c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, privileged, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ch, err := helm.Load("hostpath")
	if err != nil {
		t.Fatal(err)
	}
	// The class is cluster-scoped: named after the namespace, the test's own.
	objs, err := helm.Template(ch, "e2e", ns, map[string]any{
		"image":        map[string]any{"repository": repository, "tag": tag},
		"storageClass": map[string]any{"create": true, "name": ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	installObjects(t, "charts/hostpath", objs)
	mc := newManifestsClient(t)
	// node-local mode: one DaemonSet, the release's provisioners.
	for _, obj := range objs {
		if obj.GetKind() == "DaemonSet" {
			if err := c.WaitDaemonSetReady(ctx, ns, obj.GetName()); err != nil {
				t.Fatal(err)
			}
		}
	}

	claims := c.CreateTestNamespace(t, "hostpath-chart-claims")
	const name = "writer"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(claims).Create(ctx, framework.NewPVC(claims, name, ns, "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RunPod(ctx, claims, writerPod(name, c.Image(cluster.BusyboxImage))); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, claims, name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != hostpathDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, hostpathDir)
	}
	pod, err := c.Client.CoreV1().Pods(claims).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.Node(pod.Spec.NodeName)
	if node == nil {
		t.Fatalf("pod %s ran on %q, not a node of the cluster", name, pod.Spec.NodeName)
	}
	log, err := c.PodLog(ctx, claims, name)
	if err != nil {
		t.Fatal(err)
	}
	onNode, err := node.Exec(ctx, "cat", path.Join(pv.Spec.HostPath.Path, "SUCCESS"))
	if err != nil {
		t.Fatalf("the pod's file is not in the volume's directory on %s: %v", node.Name, err)
	}
	if strings.TrimSpace(string(onNode)) == "" || string(onNode) != log {
		t.Errorf("SUCCESS on %s holds %q, the pod printed %q", node.Name, onNode, log)
	}

	if err := c.Client.CoreV1().Pods(claims).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(claims).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if out, err := node.Exec(ctx, "ls", "-A", hostpathDir); err != nil || strings.Contains(string(out), pv.Name) {
		t.Errorf("after PV %s was deleted, %s on %s holds %q (%v)", pv.Name, hostpathDir, node.Name, out, err)
	}

	// helm uninstall: the rendered objects in reverse order.
	if err := Remove(ctx, mc, objs); err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		r, err := mc.Resource(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after uninstalling, %s %s/%s: %v, want NotFound", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("after uninstalling, pod %s/%s is left (%s)", ns, p.Name, p.Status.Phase)
	}
	// What the provisioners wrote at run time stays in the release's
	// namespace, as after helm uninstall: their in-flight journals, empty.
	cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Logf("after uninstalling, ConfigMap %s/%s stays with %d key(s)", ns, cm.Name, len(cm.Data))
		}
	}
}
