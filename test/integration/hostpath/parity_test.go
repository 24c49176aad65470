// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

// writeConfig writes a config.json as a ConfigMap mount would hold it: the
// file is replaced, never edited in place.
func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func nodePathMap(entries ...string) string {
	return `{"nodePathMap":[` + strings.Join(entries, ",") + `]}`
}

func nodeEntry(node string, paths ...string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = `"` + p + `"`
	}
	return `{"node":"` + node + `","paths":[` + strings.Join(quoted, ",") + `]}`
}

// TestConfigNodePathMap runs the provisioner with --config: claims go to
// the node's path from the map (the default entry for unlisted nodes), the
// file is reloaded when it changes, and an invalid file keeps the last
// valid configuration.
func TestConfigNodePathMap(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	e := setup(t, "config", nil)
	first, second := newPVDir(t), newPVDir(t)
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, nodePathMap(nodeEntry("DEFAULT_PATH_FOR_NON_LISTED_NODES", first), nodeEntry("node-z")))
	p := startProvisioner(t, e.env(), e.args(node, "--config="+config, "--config-reload-interval=200ms")...)

	e.createPVC(t, "one", nil)
	pv := bound(ctx, t, e.ns, "one")
	checkVolume(t, pv, first, node)

	// An invalid file: logged, the last valid configuration stays.
	writeConfig(t, config, nodePathMap(nodeEntry(node, "relative")))
	if err := p.WaitForLog(ctx, "Keeping the last valid configuration", `path \"relative\" must be absolute`); err != nil {
		t.Fatal(err)
	}
	e.createPVC(t, "two", nil)
	checkVolume(t, bound(ctx, t, e.ns, "two"), first, node)

	// A valid change is applied: this node now uses the second path.
	writeConfig(t, config, nodePathMap(nodeEntry(node, second)))
	if err := p.WaitForLog(ctx, "Applied configuration", second); err != nil {
		t.Fatal(err)
	}
	e.createPVC(t, "three", nil)
	pv3 := bound(ctx, t, e.ns, "three")
	checkVolume(t, pv3, second, node)

	// Deletion finds the volume under the path of its time only while that
	// path is still configured.
	deletePVC(t, e.ns, "three")
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pv3.Name); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, second); len(got) != 0 {
		t.Errorf("%s holds %v after its volume was deleted", second, got)
	}
}

// TestCapacityWarning: a claim larger than the budget of every path of the
// node (here its filesystem's size) gets a Warning event naming the node,
// the path and the numbers, and nothing is created.
func TestCapacityWarning(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "capacity", nil)
	startProvisioner(t, e.env(), e.args(node)...)
	pvc := e.createPVC(t, "huge", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Ei")
	})
	ev, err := framework.WaitForEvent(ctx, cp.Client, pvc, "ProvisioningFailed")
	if err != nil {
		t.Fatal(err)
	}
	want := "no room on node " + node + " for a request of 1Ei: " + e.pvDir + " has "
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) || !strings.Contains(ev.Message, "(the size of its filesystem)") {
		t.Errorf("event %s %q, want a Warning containing %q", ev.Type, ev.Message, want)
	}
	if got := entries(t, e.pvDir); len(got) != 0 {
		t.Errorf("--pv-dir holds %v for a refused claim", got)
	}
}

// TestLocalVolumeType: volumeType local from the claim annotation gives a
// PV with spec.local and node affinity on --node-label-key's default.
func TestLocalVolumeType(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "local", nil)
	startProvisioner(t, e.env(), e.args(node)...)
	e.createPVC(t, "data", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Annotations = map[string]string{"volumeType": "local"}
	})
	pv := bound(ctx, t, e.ns, "data")
	if pv.Spec.Local == nil || pv.Spec.Local.Path != filepath.Join(e.pvDir, pv.Name) || pv.Spec.HostPath != nil {
		t.Errorf("PV source %+v, want local %s", pv.Spec.PersistentVolumeSource, filepath.Join(e.pvDir, pv.Name))
	}
	req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != corev1.LabelHostname || !slices.Equal(req.Values, []string{node}) {
		t.Errorf("node affinity %+v", req)
	}
}

// TestSharedFileSystemRWX: with a sharedFileSystemPath, ReadWriteMany
// claims are bound to volumes without node affinity.
func TestSharedFileSystemRWX(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "shared", nil)
	shared := newPVDir(t)
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, `{"nodePathMap":[],"sharedFileSystemPath":"`+shared+`"}`)
	startProvisioner(t, e.env(), e.args(node, "--config="+config)...)
	e.createPVC(t, "rwx", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	})
	pv := bound(ctx, t, e.ns, "rwx")
	if pv.Spec.NodeAffinity != nil || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != filepath.Join(shared, pv.Name) {
		t.Errorf("PV %+v: want a hostPath under %s and no node affinity", pv.Spec, shared)
	}
	deletePVC(t, e.ns, "rwx")
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, shared); len(got) != 0 {
		t.Errorf("shared path holds %v", got)
	}
}

// TestLocalPathReadmeStorageClass replays the StorageClass of
// rancher/local-path-provisioner's README ("ssd-local-path": a nodePath of
// the map and a pathPattern of namespace and claim), verbatim but for the
// provisioner name, and rewritten in this provisioner's ${} spelling: either
// way the volume lands in <nodePath>/<namespace>/<claim> and is removed with
// its claim.
func TestLocalPathReadmeStorageClass(t *testing.T) {
	ssd, other := newPVDir(t), newPVDir(t)
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, nodePathMap(nodeEntry("DEFAULT_PATH_FOR_NON_LISTED_NODES", other, ssd)))
	for name, pattern := range map[string]string{"readme": "{{ .PVC.Namespace }}/{{ .PVC.Name }}/", "readme-dollar": "${.PVC.namespace}/${.PVC.name}"} {
		t.Run(name, func(t *testing.T) {
			ctx := framework.TestContext(t, time.Minute)
			e := setup(t, name, func(sc *storagev1.StorageClass) {
				sc.Parameters = map[string]string{"nodePath": ssd, "pathPattern": pattern}
				sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
				sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
			})
			startProvisioner(t, e.env(), e.args(node, "--config="+config)...)
			e.createPVC(t, "db", func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{annSelectedNode: node}
			})
			pv := bound(ctx, t, e.ns, "db")
			want := filepath.Join(ssd, e.ns, "db")
			if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != want {
				t.Fatalf("PV source %+v, want hostPath %s", pv.Spec.PersistentVolumeSource, want)
			}
			if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
				t.Fatalf("%s: %v", want, err)
			}
			deletePVC(t, e.ns, "db")
			if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(want); !os.IsNotExist(err) {
				t.Errorf("%s after delete: %v", want, err)
			}
		})
	}
}

// TestLocalPathPathPatternRules: a Go-template pathPattern outside
// <namespace>/<claim>/ (local-path's old default directory name) gets a
// Warning event naming allowUnsafePathPattern; with it the claim is bound,
// and a pattern that leaves the node path is refused all the same.
func TestLocalPathPathPatternRules(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	const oldDefault = "{{ .PVName }}_{{ .PVC.Namespace }}_{{ .PVC.Name }}"
	e := setup(t, "lp-unsafe", func(sc *storagev1.StorageClass) {
		sc.Parameters = map[string]string{"pathPattern": oldDefault}
	})
	startProvisioner(t, e.env(), e.args(node)...)
	pvc := e.createPVC(t, "refused", nil)
	ev, err := framework.WaitForEvent(ctx, cp.Client, pvc, "ProvisioningFailed")
	if err != nil {
		t.Fatal(err)
	}
	if want := "which is not under " + e.ns + "/refused/"; ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) ||
		!strings.Contains(ev.Message, `allowUnsafePathPattern: "true"`) {
		t.Errorf("event %s %q, want a Warning containing %q and the parameter", ev.Type, ev.Message, want)
	}

	unsafe := cp.CreateTestStorageClass(t, framework.NewStorageClass(e.ns+"-unsafe", e.provisioner,
		map[string]string{"pathPattern": oldDefault, "allowUnsafePathPattern": "true"}))
	escape := cp.CreateTestStorageClass(t, framework.NewStorageClass(e.ns+"-escape", e.provisioner,
		map[string]string{"pathPattern": "{{ .PVC.Annotations.dir }}", "allowUnsafePathPattern": "true"}))
	t.Cleanup(func() { deleteVolumesOfClass(context.Background(), t, unsafe.Name) })
	claimOf := func(name, class string, annotations map[string]string) *corev1.PersistentVolumeClaim {
		c := framework.NewPVC(e.ns, name, class, "1Gi")
		c.Annotations = annotations
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	claimOf("old-name", unsafe.Name, nil)
	pv := bound(ctx, t, e.ns, "old-name")
	if want := filepath.Join(e.pvDir, pv.Name+"_"+e.ns+"_old-name"); pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != want {
		t.Errorf("PV source %+v, want hostPath %s", pv.Spec.PersistentVolumeSource, want)
	}
	out := claimOf("escape", escape.Name, map[string]string{"dir": "../../etc"})
	ev, err = framework.WaitForEvent(ctx, cp.Client, out, "ProvisioningFailed")
	if err != nil {
		t.Fatal(err)
	}
	if want := `it expands to "../../etc", which could leave the node path`; !strings.Contains(ev.Message, want) {
		t.Errorf("event %q, want %q", ev.Message, want)
	}
}

// TestLocalPathStorageClassConfigs: config.json's storageClassConfigs give
// each class its own paths (a nodePathMap for one, a sharedFileSystemPath
// for another); a claim of a class it does not list gets a Warning event.
func TestLocalPathStorageClassConfigs(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "lp-classes", nil)
	shared := cp.CreateTestStorageClass(t, framework.NewStorageClass(e.ns+"-shared", e.provisioner, nil))
	unlisted := cp.CreateTestStorageClass(t, framework.NewStorageClass(e.ns+"-unlisted", e.provisioner, nil))
	t.Cleanup(func() { deleteVolumesOfClass(context.Background(), t, shared.Name) })
	local, sharedDir := newPVDir(t), newPVDir(t)
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, `{"nodePathMap":[],"storageClassConfigs":{`+
		`"`+e.class.Name+`":`+nodePathMap(nodeEntry("DEFAULT_PATH_FOR_NON_LISTED_NODES", local))+`,`+
		`"`+shared.Name+`":{"sharedFileSystemPath":"`+sharedDir+`"}}}`)
	startProvisioner(t, e.env(), e.args(node, "--config="+config)...)

	e.createPVC(t, "local", nil)
	pv := bound(ctx, t, e.ns, "local")
	checkVolume(t, pv, local, node)
	rwx := framework.NewPVC(e.ns, "shared", shared.Name, "1Gi")
	rwx.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	if _, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, rwx, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spv := bound(ctx, t, e.ns, "shared")
	if spv.Spec.NodeAffinity != nil || spv.Spec.HostPath == nil || spv.Spec.HostPath.Path != filepath.Join(sharedDir, spv.Name) {
		t.Errorf("PV %+v: want a hostPath under %s and no node affinity", spv.Spec, sharedDir)
	}
	other, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, framework.NewPVC(e.ns, "unlisted", unlisted.Name, "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := framework.WaitForEvent(ctx, cp.Client, other, "ProvisioningFailed")
	if err != nil {
		t.Fatal(err)
	}
	if want := `StorageClass "` + unlisted.Name + `" has no entry in config.json's storageClassConfigs`; ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) {
		t.Errorf("event %s %q, want a Warning containing %q", ev.Type, ev.Message, want)
	}
	for _, c := range []struct{ claim, dir, pv string }{{"local", local, pv.Name}, {"shared", sharedDir, spv.Name}} {
		deletePVC(t, e.ns, c.claim)
		if err := framework.WaitForPVDeleted(ctx, cp.Client, c.pv); err != nil {
			t.Fatal(err)
		}
		if got := entries(t, c.dir); len(got) != 0 {
			t.Errorf("%s holds %v after its volume was deleted", c.dir, got)
		}
	}
}

// TestLocalPathScriptsRefused: local-path's ConfigMap keys setup, teardown
// and helperPod.yaml, mounted beside config.json, stop a provisioner that
// makes directories itself at start, with an error saying where they run
// (helper pods): it would not run them, and must not look as if it did.
func TestLocalPathScriptsRefused(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "lp-scripts", nil)
	dir := t.TempDir()
	writeConfig(t, filepath.Join(dir, "config.json"), nodePathMap(nodeEntry("DEFAULT_PATH_FOR_NON_LISTED_NODES", e.pvDir)))
	for _, f := range []string{"setup", "teardown", "helperPod.yaml"} {
		writeConfig(t, filepath.Join(dir, f), "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n")
	}
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{Binary: binary(t),
		Args: append([]string{"--kubeconfig=" + cp.KubeconfigPath}, e.args(node, "--config="+filepath.Join(dir, "config.json"))...),
		Env:  e.env(), LogPath: filepath.Join(t.TempDir(), "refused.log"), NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-ctx.Done():
		_ = p.Kill()
		t.Fatalf("the provisioner runs with setup, teardown and helperPod.yaml beside its config.json; log:\n%s", p.LogTail(20))
	}
	for _, want := range []string{
		"local-path's setup and teardown run in helper pods: start the provisioner with --helper-pods (chart value mode: helper-pods",
		"or remove setupCommand, teardownCommand, cmdTimeoutSeconds and the ConfigMap keys setup, teardown and helperPod.yaml",
	} {
		if !p.HasLog(want) {
			t.Errorf("log lacks %q:\n%s", want, p.LogTail(20))
		}
	}
}
