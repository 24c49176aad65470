// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

// Local-path's quota example, in the shape of its README: setup reads
// local-path's -p/-s/-m arguments (getopts) and VOL_*; it refuses a quota
// above 1Gi after making the directory (as a quota tool fails midway), and
// hangs for 3Gi (a quota tool that never returns).
const (
	quotaSetupScript = `#!/bin/sh
set -eu
while getopts "m:s:p:a:" opt; do
  case $opt in
    p) absolutePath=$OPTARG ;;
    s) sizeInBytes=$OPTARG ;;
    m) volMode=$OPTARG ;;
    a) action=$OPTARG ;;
  esac
done
mkdir -m 0777 -p "$VOL_DIR"
if [ "$VOL_SIZE_BYTES" -eq 3221225472 ]; then sleep 3600; fi
if [ "$VOL_SIZE_BYTES" -gt 1073741824 ]; then echo "quota of $VOL_SIZE_BYTES bytes refused: at most 1Gi" >&2; exit 3; fi
echo "$VOL_SIZE_BYTES $VOL_MODE $sizeInBytes $volMode $action $absolutePath" > "$VOL_DIR/.quota"
`
	quotaTeardownScript = `#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
`
	scriptsTimeoutSeconds = 20
)

// TestHostpathLocalPathScripts runs local-path's ConfigMap (config.json
// with cmdTimeoutSeconds, the setup and teardown scripts, helperPod.yaml
// naming busybox) with the helper-pods provisioner on real nodes: the
// script runs in busybox on the claim's node with local-path's inputs, the
// directory has its mode and the file it recorded, and the teardown
// removes it. A failing setup is a Warning with its output and no PV; a
// hanging one is stopped at cmdTimeoutSeconds; neither leaves a directory
// or a pod.
func TestHostpathLocalPathScripts(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, err := PushImage(ctx, c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	const dir = "hostpath/deploy/helper-pods"
	config, _ := json.Marshal(map[string]any{
		"nodePathMap":       []any{map[string]any{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []string{hostpathDir}}},
		"cmdTimeoutSeconds": scriptsTimeoutSeconds,
	})
	template := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: helper-pod\nspec:\n  containers:\n  - name: helper-pod\n    image: " +
		c.Image(cluster.BusyboxImage) + "\n    imagePullPolicy: IfNotPresent\n"
	objs, err := RenderOverlay(dir, Overlay{Images: []ImageOverride{{hostpathImage, ref}}, Patches: []string{`apiVersion: apps/v1
kind: Deployment
metadata:
  name: hostpath-provisioner
  namespace: ` + hostpathNS + `
spec:
  template:
    spec:
      containers:
        - name: hostpath-provisioner
          args: [--leader-election, --config=/etc/config/config.json, --helper-pods, --http-endpoint=:8080]
          volumeMounts:
            - {name: config, mountPath: /etc/config}
      volumes:
        - name: config
          configMap: {name: local-path-config}
`}})
	if err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "local-path-config", "namespace": hostpathNS},
		"data": map[string]any{
			"config.json": string(config), "setup": quotaSetupScript, "teardown": quotaTeardownScript, "helperPod.yaml": template,
		},
	}}
	installObjects(t, dir, append(objs, cm))
	if err := c.WaitDeploymentAvailable(ctx, hostpathNS, "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}
	helpers := watchHelperPods(ctx, t, hostpathNS)
	ns := c.CreateTestNamespace(t, "scripts")
	node := c.Nodes[0]

	// The README's claim and writer pod.
	const name = "quota"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, "hostpath", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := writerPod(name, c.Image(cluster.BusyboxImage))
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node.Name}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	if err := c.WaitPodPhase(ctx, ns, name, corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	vol := pv.Spec.HostPath.Path
	if got, err := node.Exec(ctx, "cat", vol+"/.quota"); err != nil || string(got) != "1073741824 Filesystem 1073741824 Filesystem create "+vol+"\n" {
		t.Errorf("the setup script recorded %q (%v) on %s, want local-path's inputs for a 1Gi Filesystem volume at %s", got, err, node.Name, vol)
	}
	if st, err := node.Exec(ctx, "stat", "-c", "%a", vol); err != nil || strings.TrimSpace(string(st)) != "777" {
		t.Errorf("the volume's directory has mode %q (%v), want the script's 777", st, err)
	}
	create := helpers.waitGone(ctx, t, "hostpath-create-"+pv.Name)
	if img := create.Spec.Containers[0].Image; img != c.Image(cluster.BusyboxImage) || create.Status.Phase != corev1.PodSucceeded {
		t.Errorf("setup pod ran %s, ended %s; want helperPod.yaml's busybox, Succeeded", img, create.Status.Phase)
	}
	// Before the script, the provisioner's own image checked the path for links.
	if inits := create.Status.InitContainerStatuses; len(inits) != 1 || inits[0].State.Terminated == nil || inits[0].State.Terminated.ExitCode != 0 ||
		create.Spec.InitContainers[0].Image != ref {
		t.Errorf("setup pod's init containers %+v (spec %+v), want the path check in %s, exited 0", inits, create.Spec.InitContainers, ref)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	checkGoneFromNode(ctx, t, node, hostpathDir, pv.Name)

	// Failing and hanging setups: a Warning naming the cause, no PV.
	for _, tc := range []struct{ name, size, want string }{
		{"refused", "2Gi", "quota of 2147483648 bytes refused: at most 1Gi"},
		{"hangs", "3Gi", "did not finish within cmdTimeoutSeconds 20s"},
	} {
		pvc := framework.NewPVC(ns, tc.name, "hostpath", tc.size)
		pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node.Name}
		created, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var msg string
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			events, err := framework.ListEvents(ctx, c.Client, created)
			for _, e := range events {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "the teardown script ran after it") {
					msg = e.Message
				}
			}
			return msg != "", err
		}); err != nil {
			events, _ := framework.ListEvents(context.WithoutCancel(ctx), c.Client, created)
			t.Fatalf("claim %s: no Warning that setup failed and teardown ran: %v; events: %+v; helper pods: %s", tc.name, err, events, helpers.describe())
		}
		t.Logf("claim %s: Warning after %s: %s", tc.name, time.Since(start).Round(time.Second), msg)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("claim %s: Warning %q, want it to say %q", tc.name, msg, tc.want)
		}
		got, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, tc.name, metav1.GetOptions{})
		if err != nil || got.Spec.VolumeName != "" {
			t.Errorf("claim %s: volume %q (%v), want none", tc.name, got.Spec.VolumeName, err)
		}
		if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, tc.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What the failed setups made, the teardowns removed.
	checkGoneFromNode(ctx, t, node, hostpathDir, "")
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		left, err := c.Client.CoreV1().Pods(hostpathNS).List(ctx, metav1.ListOptions{LabelSelector: helperLabelManagedBy + "=" + helperManagedBy})
		return err == nil && len(left.Items) == 0, nil
	}); err != nil {
		t.Errorf("helper pods left behind: %s", helpers.describe())
	}
}
