// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// execSetup starts an exec-launcher provisioner with driver and returns its
// name, a namespace and the driver's root directory.
func execSetup(t *testing.T, driver string, timeout time.Duration, flexDriver string) (name, ns, root string) {
	t.Helper()
	requireTools(t, "sh", "jq")
	name = "test.kubeprov.io/" + uniqueName(t, "flex")
	ns = cp.CreateTestNamespace(t, "flex")
	root = t.TempDir()
	l := &flex.ExecLauncher{Driver: driver, Timeout: timeout}
	startController(t, name, newProvisioner(t, name, "id-"+ns, l, flexDriver), ns, "ctrl-"+ns)
	return name, ns, root
}

// The storage admin's example driver, as shipped: a directory per volume,
// a hostPath PV, nothing left after delete.
func TestExecHostdirExample(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	name, ns, root := execSetup(t, hostdirDriver, 30*time.Second, "")
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), name, map[string]string{"root": root}))
	pvc := createPVC(t, ctx, ns, "data", class.Name, "1500Mi")

	_, pv, err := framework.WaitForPVCBound(ctx, client(t), ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, pv.Name)
	if hp := pv.Spec.HostPath; hp == nil || hp.Path != dir || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("PV source = %+v, want hostPath %s of type Directory", pv.Spec.PersistentVolumeSource, dir)
	}
	// 1500Mi rounds up to 2 GiB, which the driver returns as the capacity.
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("capacity = %s, want 2Gi", got.String())
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != class.Name {
		t.Errorf("reclaim policy %s, class %q", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
	}
	in := expectAnnotations(t, pv, name, "id-"+ns, "exec")
	if in["root"] != root || in[flex.KeyPVCName] != "data" || in[flex.KeyPVCNamespace] != ns || in[flex.KeyRequestGiB] != "2" || in[flex.KeyRequestMiB] != "1500" {
		t.Errorf("recorded input = %v", in)
	}
	// Writable by pods of any user (the e2e suite's non-root pod writes
	// into it), whatever the driver's umask.
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory %s: %v, %v; want a directory of mode 0777", dir, fi.Mode(), err)
	}

	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	if dirs := volumeDirs(t, root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
}

// hostdir's mode parameter sets the directory's permission bits; anything
// but octal bits is refused before anything is made.
func TestExecHostdirMode(t *testing.T) {
	requireTools(t, "sh", "jq")
	root := t.TempDir()
	run := func(pv, mode string) (string, error) {
		in := fmt.Sprintf(`{"root": %q, "kubernetes.io/pvOrVolumeName": %q, "mode": %q}`, root, pv, mode)
		out, err := exec.Command(hostdirDriver, flex.ActionProvision, in).Output()
		return string(out), err
	}
	if out, err := run("pvc-0750", "0750"); err != nil {
		t.Fatalf("mode 0750: %v: %s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(root, "pvc-0750")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("mode 0750 made %v (%v)", fi.Mode(), err)
	}
	out, err := run("pvc-symbolic", "u+rwx")
	if err == nil || !strings.Contains(out, `"status":"Failure"`) || !strings.Contains(out, "parameter mode must be octal") {
		t.Errorf("mode u+rwx: %v: %s, want a Failure naming the parameter", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "pvc-symbolic")); !os.IsNotExist(err) {
		t.Errorf("mode u+rwx made a directory: %v", err)
	}
}

// A FlexVolume source gets --flex-driver; delete receives what provision
// recorded plus the options the driver returned.
func TestExecFlexVolumeDeleteGetsRecordedInput(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	name, ns, root := execSetup(t, testDriver, 30*time.Second, "kubeprov~test")
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), name, map[string]string{"root": root, "mode": "flex", "pool": "gold"}))
	pvc := createPVC(t, ctx, ns, "data", class.Name, "1Gi")

	_, pv, err := framework.WaitForPVCBound(ctx, client(t), ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	f := pv.Spec.FlexVolume
	if f == nil || f.Driver != "kubeprov~test" || f.Options["volumeID"] != pv.Name {
		t.Fatalf("PV source = %+v, want flexVolume kubeprov~test with volumeID %s", pv.Spec.PersistentVolumeSource, pv.Name)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("3Gi")) != 0 {
		t.Errorf("capacity = %s, want the driver's 3Gi", got.String())
	}
	recorded := expectAnnotations(t, pv, name, "id-"+ns, "exec")
	provisioned := readInput(t, waitForFile(t, ctx, filepath.Join(root, "calls", "provision-"+pv.Name+"-1")))
	for k, v := range provisioned {
		if recorded[k] != v {
			t.Errorf("recorded input %s = %q, the driver got %q", k, recorded[k], v)
		}
	}
	want := map[string]string{
		"pool": "gold", flex.KeyPVName: pv.Name, flex.KeyPVCName: "data", flex.KeyPVCNamespace: ns, flex.KeyPVCUID: string(pvc.UID),
		flex.KeyStorageClass: class.Name, flex.KeyAccessModes: "ReadWriteOnce", flex.KeyVolumeMode: "Filesystem",
		flex.KeyRequestBytes: strconv.Itoa(1 << 30), flex.KeyRequestMiB: "1024", flex.KeyRequestGiB: "1", flex.KeyReclaimPolicy: "Delete",
	}
	for k, v := range want {
		if provisioned[k] != v {
			t.Errorf("provision input %s = %q, want %q", k, provisioned[k], v)
		}
	}

	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	deleted := readInput(t, waitForFile(t, ctx, filepath.Join(root, "calls", "delete-"+pv.Name+"-1")))
	for k, v := range provisioned {
		if deleted[k] != v {
			t.Errorf("delete input %s = %q, provision had %q", k, deleted[k], v)
		}
	}
	if deleted["volumeID"] != pv.Name {
		t.Errorf("delete input lacks the driver's option volumeID: %v", deleted)
	}
	if dirs := volumeDirs(t, root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
}

func TestExecFailures(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want []string
	}{
		// The driver's message and the tail of its stderr, cut to size.
		{"fail", []string{"failed: Failure: pool gold has no space left for 1Gi", "stderr: (truncated)...", "quota exceeded on pool gold"}},
		{"notsupported", []string{`("Not supported"): this backend only serves pre-created volumes`, "not retrying"}},
		{"garbage", []string{"driver printed invalid JSON", "volume created OK (this is not JSON)"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := framework.TestContext(t, testTimeout)
			name, ns, root := execSetup(t, testDriver, 30*time.Second, "")
			class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), name, map[string]string{"root": root, "mode": tc.mode}))
			pvc := createPVC(t, ctx, ns, "data", class.Name, "1Gi")
			waitForEventContaining(t, ctx, pvc, "ProvisioningFailed", tc.want...)

			current, err := client(t).CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if current.Status.Phase != corev1.ClaimPending {
				t.Errorf("claim is %s, want Pending", current.Status.Phase)
			}
			if tc.mode == "garbage" {
				// The garbage printer had made a directory: it is undone.
				waitForFile(t, ctx, filepath.Join(root, "calls", "delete-"+pvNameOf(pvc)+"-1"))
			}
			if dirs := volumeDirs(t, root); len(dirs) != 0 {
				t.Errorf("directories left behind: %v", dirs)
			}
		})
	}
}

// A driver killed at --driver-timeout may have done its work: the claim is
// retried (in the background) and bound once the driver answers, and the
// driver's whole process group is gone.
func TestExecTimeoutKillsProcessGroupAndRetries(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	name, ns, root := execSetup(t, testDriver, time.Second, "")
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), name, map[string]string{"root": root, "mode": "slow"}))
	pvc := createPVC(t, ctx, ns, "data", class.Name, "1Gi")

	waitForEventContaining(t, ctx, pvc, "ProvisioningFailed", "still in progress, will retry", "did not finish within --driver-timeout 1s")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != filepath.Join(root, pv.Name) {
		t.Errorf("PV source = %+v", pv.Spec.PersistentVolumeSource)
	}
	pid, err := strconv.Atoi(string(trimNL(waitForFile(t, ctx, filepath.Join(root, "slow-child.pid")))))
	if err != nil {
		t.Fatal(err)
	}
	// The orphaned sleep is reparented and reaped asynchronously.
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return syscall.Kill(pid, 0) == syscall.ESRCH, nil
	}); err != nil {
		t.Errorf("the driver's child process %d survived the timeout", pid)
	}
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	if dirs := volumeDirs(t, root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}

// recordingProvisioner reports the result of every Delete, so that a test
// can see an instance decide to leave a volume alone.
type recordingProvisioner struct {
	*flex.Provisioner
	deletes chan error
}

func (r *recordingProvisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	err := r.Provisioner.Delete(ctx, pv)
	select {
	case r.deletes <- err:
	default:
	}
	return err
}

// Two instances of one provisioner name with different identities: the one
// that did not provision a volume never deletes it; its owner does.
func TestIdentityProtectsForeignVolumes(t *testing.T) {
	requireTools(t, "sh", "jq")
	ctx := framework.TestContext(t, testTimeout)
	name := "test.kubeprov.io/" + uniqueName(t, "flex")
	ns := cp.CreateTestNamespace(t, "flex")
	root := t.TempDir()
	l := &flex.ExecLauncher{Driver: hostdirDriver, Timeout: 30 * time.Second}
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), name, map[string]string{"root": root}))

	stopA := startController(t, name, newProvisioner(t, name, "instance-a", l, ""), ns, "a")
	pvc := createPVC(t, ctx, ns, "data", class.Name, "1Gi")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	expectAnnotations(t, pv, name, "instance-a", "exec")
	stopA()

	b := &recordingProvisioner{Provisioner: newProvisioner(t, name, "instance-b", l, ""), deletes: make(chan error, 10)}
	stopB := startController(t, name, b, ns, "b")
	if err := client(t).CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitForPVPhase(ctx, client(t), pv.Name, corev1.VolumeReleased); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.deletes:
		if !controller.IsIgnored(err) {
			t.Fatalf("instance-b's Delete returned %v, want an IgnoredError", err)
		}
	case <-ctx.Done():
		t.Fatal("instance-b never looked at the released volume")
	}
	stopB()
	if _, err := os.Stat(filepath.Join(root, pv.Name)); err != nil {
		t.Fatalf("instance-b deleted instance-a's volume: %v", err)
	}
	if _, err := client(t).CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("PV of instance-a is gone: %v", err)
	}

	startController(t, name, newProvisioner(t, name, "instance-a", l, ""), ns, "a2")
	if err := framework.WaitForPVDeleted(ctx, client(t), pv.Name); err != nil {
		t.Fatal(err)
	}
	if dirs := volumeDirs(t, root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
}
