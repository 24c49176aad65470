// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
)

// TestSubdirNestedExports (issue 25 case 3): the default share is the
// export /…/share and the share fast the export /…/share/fast of the same
// server, each mounted at a directory of its own (here fast's mount point
// is a link to the default share's fast, so both views agree as they would
// over NFS). A claim of the default share never gets fast's export, nor a
// directory inside it; claims of fast are unaffected. No Ganesha is needed:
// subdir mode only makes directories.
func TestSubdirNestedExports(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := cp.CreateTestNamespace(t, "nfs-nested")
	share := filepath.Join(t.TempDir(), "share")
	if err := os.MkdirAll(filepath.Join(share, "fast"), 0o755); err != nil {
		t.Fatal(err)
	}
	fastRoot := filepath.Join(t.TempDir(), "fast")
	if err := os.Symlink(filepath.Join(share, "fast"), fastRoot); err != nil {
		t.Fatal(err)
	}
	name := "kubeprov.io/nfs-nested"
	startProc(t, []string{"--mode=subdir", "--provisioner=" + name,
		"--nfs-server=" + loopback, "--nfs-path=" + share, "--nfs-root=" + share,
		"--share=name=fast,server=" + loopback + ",path=" + share + "/fast,root=" + fastRoot}, nil)
	class := func(suffix string, params map[string]string) string {
		n := "nfs-nested-" + suffix + "-" + ns
		cp.CreateTestStorageClass(t, framework.NewStorageClass(n, name, params))
		return n
	}
	byAnnotation := class("default", map[string]string{"pathPattern": "${.PVC.annotations.dir}", "onDelete": "delete"})
	onFast := class("fast", map[string]string{"share": "fast", "pathPattern": "${.PVC.name}", "onDelete": "delete"})
	withDir := func(dir string) func(*corev1.PersistentVolumeClaim) {
		return func(pvc *corev1.PersistentVolumeClaim) { pvc.Annotations = map[string]string{"dir": dir} }
	}

	for claim, dir := range map[string]string{"whole": "fast", "inside": "fast/later"} {
		pvc := createPVC(t, ns, claim, byAnnotation, "1Mi", withDir(dir))
		failsWith(t, ctx, pvc, "reaches into the export of NFS share \"fast\"", share+"/fast")
	}
	if got := entries(t, filepath.Join(share, "fast")); len(got) != 0 {
		t.Errorf("share fast's export holds %v, made for default-share claims", got)
	}
	pvs, err := cp.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName == byAnnotation {
			t.Errorf("PV %s at %s for a refused claim", pv.Name, pv.Spec.NFS.Path)
		}
	}
	// Beside the nested export, and on the nested share itself: fine.
	beside := bound(t, ctx, ns, "beside", byAnnotation, withDir("fastx"))
	fast := bound(t, ctx, ns, "on-fast", onFast, nil)
	if fast.Spec.NFS.Path != share+"/fast/on-fast" || beside.Spec.NFS.Path != share+"/fastx" {
		t.Errorf("PV paths %s and %s", fast.Spec.NFS.Path, beside.Spec.NFS.Path)
	}
	deleteClaim(t, ctx, ns, "on-fast", fast.Name)
	deleteClaim(t, ctx, ns, "beside", beside.Name)
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(list))
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}
