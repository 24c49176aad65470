// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// TestCapacityWarning: a claim larger than the free space of every path of
// the node gets a Warning event naming the node, the path and the numbers,
// and nothing is created.
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
	want := "not enough free space on node " + node + ": the claim requests 1152921504606846976 bytes, " + e.pvDir + " has "
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) || !strings.Contains(ev.Message, "bytes free") {
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
// the map and a pathPattern of namespace and claim), rewritten for this
// provisioner: pathPattern's ${} spelling instead of a Go template. The
// volume lands in <nodePath>/<namespace>/<claim>; the Go template spelling
// is refused with an event that gives the rewrite.
func TestLocalPathReadmeStorageClass(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	ssd, other := newPVDir(t), newPVDir(t)
	e := setup(t, "readme", func(sc *storagev1.StorageClass) {
		sc.Parameters = map[string]string{"nodePath": ssd, "pathPattern": "${.PVC.namespace}/${.PVC.name}"}
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
	})
	config := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, config, nodePathMap(nodeEntry("DEFAULT_PATH_FOR_NON_LISTED_NODES", other, ssd)))
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

	// The upstream spelling, verbatim.
	goTemplate := setup(t, "readme-tmpl", func(sc *storagev1.StorageClass) {
		sc.Parameters = map[string]string{"nodePath": ssd, "pathPattern": "{{ .PVC.Namespace }}/{{ .PVC.Name }}"}
	})
	startProvisioner(t, goTemplate.env(), goTemplate.args(node, "--config="+config)...)
	pvc := goTemplate.createPVC(t, "db", nil)
	ev, err := framework.WaitForEvent(ctx, cp.Client, pvc, "ProvisioningFailed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.Message, "Go templates ({{ .PVC.Name }}) are not supported; write ${.PVC.namespace}") {
		t.Errorf("event %q, want the ${} rewrite", ev.Message)
	}
}
