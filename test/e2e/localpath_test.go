// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"path"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

// TestHostpathLocalPathConfig follows hostpath's README, "Moving from
// local-path-provisioner", on a real node: deploy/local-path-config (the
// DaemonSet reading config.json from its ConfigMap) given a config.json
// with local-path's storageClassConfigs, and local-path README's class,
// Go-template pathPattern included, listed there. The README's writer pod
// gets the directory <path>/<namespace>/<claim> on the node it ran on, and
// deleting the claim removes it.
func TestHostpathLocalPathConfig(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	const (
		class  = "lp-readme"
		paths  = `{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["` + hostpathDir + `"]}]}`
		config = `{"nodePathMap":[],"storageClassConfigs":{"hostpath":` + paths + `,"` + class + `":` + paths + `}}`
	)
	installLocalPathConfig(ctx, t, config, nil)
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class},
		Provisioner:       "kubeprov.io/hostpath",
		Parameters:        map[string]string{"pathPattern": "{{ .PVC.Namespace }}/{{ .PVC.Name }}/"},
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := c.Client.StorageV1().StorageClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting StorageClass %s: %v", class, err)
		}
	})

	ns := c.CreateTestNamespace(t, "local-path")
	node := c.Nodes[len(c.Nodes)-1]
	const name = "data"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, class, "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := writerPod(name, c.Image(cluster.BusyboxImage))
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node.Name}
	if err := c.RunPod(ctx, ns, pod); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	want := path.Join(hostpathDir, ns, name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != want {
		t.Fatalf("PV %s has source %+v, want the hostPath %s", pv.Name, pv.Spec.PersistentVolumeSource, want)
	}
	log, err := c.PodLog(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	checkWrittenOnNode(ctx, t, node, want, log)

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	checkGoneFromNode(ctx, t, node, path.Join(hostpathDir, ns), "")
	// The namespace's directory, which the pattern made, is the
	// administrator's to remove; later tests want the path as they found it.
	if out, err := node.Exec(ctx, "rmdir", path.Join(hostpathDir, ns)); err != nil {
		t.Errorf("removing %s on %s: %s %v", path.Join(hostpathDir, ns), node.Name, out, err)
	}
}

// installLocalPathConfig installs deploy/local-path-config (the image just
// built), its config.json replaced by config, with the kustomize
// components (relative to the repository's root) and further strategic
// merge patches a user would add, and waits for its DaemonSet to be ready.
func installLocalPathConfig(ctx context.Context, t *testing.T, config string, components []string, patches ...string) {
	t.Helper()
	const dir = "hostpath/deploy/local-path-config"
	ref, err := PushImage(ctx, c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	configPatch := `apiVersion: v1
kind: ConfigMap
metadata:
  name: hostpath-config
  namespace: ` + hostpathNS + `
data:
  config.json: '` + config + `'
`
	objs, err := RenderOverlay(dir, Overlay{
		Images:     []ImageOverride{{hostpathImage, ref}},
		Components: components,
		Patches:    append([]string{configPatch}, patches...),
	})
	if err != nil {
		t.Fatal(err)
	}
	installObjects(t, dir, objs)
	if err := c.WaitDaemonSetReady(ctx, hostpathNS, "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}
}
