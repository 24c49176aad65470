// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/kubeletsim"
)

// TestHelperPodScriptsPathIsOneShellWord (issue 36 case 3): with
// local-path's setup and teardown scripts, written as users often write
// them (the path expanded unquoted), a tenant sets the annotation the
// class's pathPattern reads to "*". Before, its setup globbed to the other
// volume's directory and its teardown removed that volume's data. Now the
// claim gets a Warning naming the annotation and the character, and no
// directory is made or touched. kubeletsim runs the script pods: the path
// check (the provisioner binary) and then the scripts with this machine's
// /bin/sh.
func TestHelperPodScriptsPathIsOneShellWord(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	e := setup(t, "scripts", byAnnotation)
	const helperImage, scriptImage = "hostpath-helper:scripts", "busybox:scripts"
	startHelperSim(t, ctx, map[string]kubeletsim.Image{helperImage: {Command: []string{binary(t)}}, scriptImage: {}})
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, `{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["`+e.pvDir+`"]}]}`)
	for name, content := range map[string]string{
		"setup":          "#!/bin/sh\nset -eu\nmkdir -m 0777 -p ${VOL_DIR}\n",
		"teardown":       "#!/bin/sh\nset -eu\nrm -rf $VOL_DIR\n",
		"helperPod.yaml": "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: helper-pod\n    image: " + scriptImage + "\n",
	} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(config), name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProvisioner(t, e.env(), e.args(controllerNode, "--helper-pods", "--helper-image="+helperImage, "--config="+config)...)
	onHelperNode := func(dir string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"dir": dir, annSelectedNode: helperNode}
		}
	}

	// Another tenant's volume, holding data.
	e.createPVC(t, "victim", onHelperNode("victim"))
	victim := bound(ctx, t, e.ns, "victim")
	data := filepath.Join(victim.Spec.HostPath.Path, "data")
	if err := os.WriteFile(data, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}

	attack := e.createPVC(t, "attack", onHelperNode("*"))
	var pvName string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, attack.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pvName = pvc.Spec.VolumeName
		return pvName != "" || hasWarning(ctx, t, attack, `claim annotation "dir" "*": not one shell word: it contains '*'`), nil
	})
	if err != nil {
		t.Fatalf("claim with annotation dir \"*\": neither bound nor refused: %v", err)
	}
	if pvName != "" {
		// Today's code: the PV is made; its teardown runs on deletion.
		deletePVC(t, e.ns, attack.Name)
		if err := framework.WaitForPVDeleted(ctx, cp.Client, pvName); err != nil {
			t.Fatal(err)
		}
		t.Errorf("claim with annotation dir \"*\" got PV %s, want it refused", pvName)
	}
	if got, err := os.ReadFile(data); err != nil || string(got) != "keep" {
		t.Errorf("the other volume's data after the claim with annotation dir \"*\": %q, %v; want it untouched", got, err)
	}
	if names := entries(t, e.pvDir); len(names) != 1 || names[0] != "victim" {
		t.Errorf("the node path holds %q, want only the other volume's directory", names)
	}
	assertNoHelperPods(ctx, t, e.ns)
}
