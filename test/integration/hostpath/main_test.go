// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
)

const (
	binaryName = "hostpath-provisioner"
	// What users see on hostpath PVs (hostpath/pkg/hostpath).
	annNode = "hostpath.kubeprov.io/node"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{AuditLog: true, ServiceAccounts: true}, func(c *framework.ControlPlane) { cp = c })
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	started   atomic.Int32
)

// binary builds hostpath-provisioner once for the package.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		binPath, buildErr = framework.BuildBinary(ctx, "hostpath", binaryName)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startProvisioner runs the binary against the control plane with short
// retry intervals, stops it when the test ends and shows its log if the test
// failed. Later flags override earlier ones, so args can override the
// defaults here.
func startProvisioner(t *testing.T, env []string, args ...string) *framework.Process {
	t.Helper()
	ctx := framework.TestContext(t, 2*time.Minute)
	base := []string{"--kubeconfig=" + cp.KubeconfigPath, "--retry-interval-start=200ms", "--retry-interval-max=2s", "-v=2"}
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", binaryName, started.Add(1)))
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{Binary: binary(t), Args: append(base, args...), Env: env, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	framework.StopAtEnd(t, p)
	return p
}

// testEnv is one test's namespace, StorageClass and provisioner name, all
// its own, and a volume directory.
type testEnv struct {
	ns, provisioner string
	class           *storagev1.StorageClass
	pvDir           string
}

// setup creates a namespace and a StorageClass (Immediate, Delete, unless
// mutate says otherwise) for a provisioner name of the test's own.
func setup(t *testing.T, prefix string, mutate func(*storagev1.StorageClass)) *testEnv {
	t.Helper()
	ns := cp.CreateTestNamespace(t, "hostpath-"+prefix)
	e := &testEnv{ns: ns, provisioner: "test.kubeprov.io/" + ns, pvDir: newPVDir(t)}
	sc := framework.NewStorageClass(ns, e.provisioner, nil)
	if mutate != nil {
		mutate(sc)
	}
	e.class = cp.CreateTestStorageClass(t, sc)
	// Before the class goes (cleanups run last first).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		deleteVolumesOfClass(ctx, t, sc.Name)
	})
	return e
}

// args are the flags of a provisioner for this test's class and namespace.
func (e *testEnv) args(node string, extra ...string) []string {
	return append([]string{"--provisioner=" + e.provisioner, "--pv-dir=" + e.pvDir, "--node-name=" + node}, extra...)
}

// env is the environment a pod of the provisioner gets from the downward API.
func (e *testEnv) env() []string { return []string{"POD_NAMESPACE=" + e.ns} }

// createPVC creates a claim of the test's class; mutate may change it first.
func (e *testEnv) createPVC(t *testing.T, name string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := framework.NewPVC(e.ns, name, e.class.Name, "1Gi")
	if mutate != nil {
		mutate(pvc)
	}
	pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(t.Context(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

func deletePVC(t *testing.T, ns, name string) {
	t.Helper()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// volumesOfClass lists the PVs of a class.
func volumesOfClass(ctx context.Context, t *testing.T, class string) []corev1.PersistentVolume {
	t.Helper()
	list, err := cp.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(pv corev1.PersistentVolume) bool { return pv.Spec.StorageClassName != class })
}

// deleteVolumesOfClass removes PV objects a failed test left behind, so
// that they do not outlive their test.
func deleteVolumesOfClass(ctx context.Context, t *testing.T, class string) {
	for _, pv := range volumesOfClass(ctx, t, class) {
		if err := cp.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// newPVDir returns an empty directory for volumes that any user can reach,
// like /var/lib on a node (t.TempDir is private to root).
func newPVDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubeprov-hostpath-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

// checkVolume checks what the provisioner puts on a PV of node in pvDir.
func checkVolume(t *testing.T, pv *corev1.PersistentVolume, pvDir, node string) {
	t.Helper()
	want := filepath.Join(pvDir, pv.Name)
	if hp := pv.Spec.HostPath; hp == nil || hp.Path != want || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("PV %s: hostPath %+v, want path %s of type Directory", pv.Name, hp, want)
	}
	if got := pv.Annotations[annNode]; got != node {
		t.Errorf("PV %s: annotation %s = %q, want %q", pv.Name, annNode, got, node)
	}
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 ||
		len(na.Required.NodeSelectorTerms[0].MatchExpressions) != 1 {
		t.Fatalf("PV %s: node affinity %+v, want one term", pv.Name, na)
	}
	if req := na.Required.NodeSelectorTerms[0].MatchExpressions[0]; req.Key != corev1.LabelHostname ||
		req.Operator != corev1.NodeSelectorOpIn || !slices.Equal(req.Values, []string{node}) {
		t.Errorf("PV %s: node affinity %+v, want %s In [%s]", pv.Name, req, corev1.LabelHostname, node)
	}
	fi, err := os.Lstat(want)
	if err != nil {
		t.Fatalf("PV %s: %v", pv.Name, err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("PV %s: %s has mode %v, want a directory with 0777", pv.Name, want, fi.Mode())
	}
}

// bound waits for a claim to be Bound and returns its PV.
func bound(ctx context.Context, t *testing.T, ns, name string) *corev1.PersistentVolume {
	t.Helper()
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}
