// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/hostpath/pkg/quota/quotatest"
	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// btrfsDir is the node path of TestHostpathBtrfsLimitsAndExpansion, its
	// own: a btrfs filesystem is mounted there for the test only.
	btrfsDir = "/var/lib/hostpath-btrfs"
	// btrfsImageBytes is the size of that filesystem: room (239 MiB free
	// once made) for btrfsBudget's claims.
	btrfsImageBytes = 320 << 20
	// btrfsBudget is the path's pathCapacity.
	btrfsBudget = "200Mi"
)

// TestHostpathBtrfsLimitsAndExpansion follows the README's "Size limits
// (btrfs)" on a real node: a btrfs filesystem with quotas enabled, mounted
// at the node's path (a loop device, as an administrator would add a disk),
// deploy/local-path-config with the component deploy/components/size-limits
// (CAP_SYS_ADMIN) and a config.json giving that node the path, budgeted
// 200Mi, with enforceCapacity "always" (a path that cannot limit would be
// refused, so a volume made is a limited one). A pod writes 12Mi into its
// 16Mi claim, then 8Mi more: "Disk quota exceeded". The claim raised to
// 48Mi (the provisioner is the resizer), a new pod writes the 8Mi. Deleting
// the claim deletes the subvolume, and gives its room back: a 170Mi claim,
// refused while the 48Mi volume held the budget (200Mi), binds then.
func TestHostpathBtrfsLimitsAndExpansion(t *testing.T) {
	ctx := framework.TestContext(t, 15*time.Minute)
	quotatest.RequireTools(t)
	node := c.Nodes[0]
	// The DaemonSet's hostPath volume makes the directory on the other
	// nodes; it goes when the test ends.
	for _, other := range c.Nodes[1:] {
		t.Cleanup(func() { removeNodeDir(t, other, btrfsDir) })
	}
	mountBtrfsOnNode(ctx, t, node, btrfsDir)
	installBtrfsProvisioner(ctx, t, node.Name)
	const class = "hostpath-btrfs"
	createStorageClass(ctx, t, &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: class},
		Provisioner:          "kubeprov.io/hostpath",
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		AllowVolumeExpansion: ptr.To(true),
	})
	ns := c.CreateTestNamespace(t, "btrfs")

	// 16Mi: 12Mi fit, 8Mi more do not.
	const name = "data"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, class, "16Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := runOnNode(ctx, t, ns, ddPod("fill", name, node.Name,
		`dd if=/dev/zero of=/mnt/first bs=1M count=12 conv=fsync 2>&1 && echo "first: 12Mi written"
dd if=/dev/zero of=/mnt/second bs=1M count=8 conv=fsync 2>&1 || echo "second: refused"`))
	if !strings.Contains(log, "first: 12Mi written") || !strings.Contains(log, "Disk quota exceeded") || !strings.Contains(log, "second: refused") {
		t.Fatalf("pod fill wrote 12Mi then 8Mi into a 16Mi volume, want the first written and the second refused with %q; it printed:\n%s", "Disk quota exceeded", log)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != btrfsDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, btrfsDir)
	}
	if out, err := node.Exec(ctx, "btrfs", "subvolume", "show", pv.Spec.HostPath.Path); err != nil {
		t.Errorf("the volume %s on %s is not a btrfs subvolume: %v", pv.Spec.HostPath.Path, node.Name, err)
	} else {
		t.Logf("btrfs subvolume show %s: %s", pv.Spec.HostPath.Path, linesWith(string(out), "referenced"))
	}

	// 48Mi: the same 8Mi fit now.
	expandClaim(ctx, t, ns, name, "48Mi")
	log = runOnNode(ctx, t, ns, ddPod("more", name, node.Name,
		`set -e
dd if=/dev/zero of=/mnt/second bs=1M count=8 conv=fsync 2>&1
echo "second: 8Mi written"`))
	if !strings.Contains(log, "second: 8Mi written") {
		t.Fatalf("pod more, after the expansion to 48Mi, printed:\n%s", log)
	}

	// A claim that fits the budget only once data's 48Mi are given back.
	const big = "big"
	bigClaim, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, big, class, "170Mi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bigPod := writerPod(big, c.Image(cluster.BusyboxImage))
	bigPod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node.Name}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, bigPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev, err := framework.WaitForEvent(ctx, c.Client, bigClaim, "ProvisioningFailed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.Message, "no room on node "+node.Name) {
		t.Errorf("claim %s: ProvisioningFailed %q, want no room on node %s (48Mi of %s taken)", big, ev.Message, node.Name, btrfsBudget)
	}

	deleteVolume(ctx, t, ns, name, pv.Name, "fill", "more")
	checkGoneFromNode(ctx, t, node, btrfsDir, pv.Name)
	checkNoSubvolume(ctx, t, node, btrfsDir)

	if err := c.WaitPodPhase(ctx, ns, big, corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	_, bigPV, err := framework.WaitForPVCBound(ctx, c.Client, ns, big)
	if err != nil {
		t.Fatal(err)
	}
	deleteVolume(ctx, t, ns, big, bigPV.Name, big)
	checkGoneFromNode(ctx, t, node, btrfsDir, "")
	checkNoSubvolume(ctx, t, node, btrfsDir)
}

// installBtrfsProvisioner installs deploy/local-path-config with the
// component size-limits, its config.json giving node the path btrfsDir
// (budgeted btrfsBudget) and enforceCapacity "always", and the DaemonSet
// mounting that path (as local-path-config's kustomization asks of every
// path config.json names).
func installBtrfsProvisioner(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	config := fmt.Sprintf(`{"nodePathMap":[{"node":%q,"paths":[%q],"pathCapacity":{%[2]q:%q}}],"enforceCapacity":"always"}`,
		node, btrfsDir, btrfsBudget)
	mount := `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: hostpath-provisioner
  namespace: ` + hostpathNS + `
spec:
  template:
    spec:
      containers:
        - name: hostpath-provisioner
          volumeMounts:
            - name: btrfs
              mountPath: ` + btrfsDir + `
      volumes:
        - name: btrfs
          hostPath:
            path: ` + btrfsDir + `
            type: DirectoryOrCreate
`
	installLocalPathConfig(ctx, t, config, []string{"hostpath/deploy/components/size-limits"}, mount)
}

// mountBtrfsOnNode does on node what an administrator does to give it a
// btrfs path with quotas: a filesystem (here in a file, through a loop
// device) mounted at dir, a directory of its own, `btrfs quota enable` and
// the rescan waited for. It runs in the node's mount namespace, where the
// kubelet and the containers' hostPath volumes see it; the host never does.
// The test's end unmounts it (the loop device, set to clear itself, is
// detached with it), removes dir and the file.
func mountBtrfsOnNode(ctx context.Context, t *testing.T, node *cluster.Node, dir string) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "btrfs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, btrfsImageBytes); err != nil {
		t.Fatal(err)
	}
	nodeRun(ctx, t, node, "mkfs.btrfs", "-q", img)
	// mkdir without -p: a directory already there is someone else's.
	nodeRun(ctx, t, node, "mkdir", dir)
	t.Cleanup(func() { removeNodeDir(t, node, dir) })
	nodeRun(ctx, t, node, "mount", "-o", "loop", img, dir)
	t.Cleanup(func() { unmountLoop(t, node, dir, img) })
	nodeRun(ctx, t, node, "btrfs", "quota", "enable", dir)
	nodeRun(ctx, t, node, "btrfs", "quota", "rescan", "-w", dir)
}

// unmountLoop unmounts dir on node, which mountBtrfsOnNode mounted from
// img, and waits until no loop device holds img any more: mount -o loop
// sets autoclear, the kernel detaches it once the filesystem is released.
func unmountLoop(t *testing.T, node *cluster.Node, dir, img string) {
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
	defer cancel()
	if out, err := node.Exec(ctx, "umount", dir); err != nil {
		t.Errorf("unmounting %s on %s: %v (%s)", dir, node.Name, err, out)
		return
	}
	var held []byte
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		held, err = node.Exec(ctx, "losetup", "--associated", img)
		return err == nil && len(strings.TrimSpace(string(held))) == 0, nil
	})
	if err != nil {
		t.Errorf("a loop device still holds %s after unmounting %s: %s", img, dir, held)
	}
}

// removeNodeDir removes the empty directory dir on node, if it is there.
func removeNodeDir(t *testing.T, node *cluster.Node, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
	defer cancel()
	if out, err := node.Exec(ctx, "sh", "-c", `! [ -d "$1" ] || rmdir "$1"`, "sh", dir); err != nil {
		t.Errorf("removing %s on %s: %v (%s)", dir, node.Name, err, out)
	}
}

// nodeRun runs argv on node, failing the test on error.
func nodeRun(ctx context.Context, t *testing.T, node *cluster.Node, argv ...string) {
	t.Helper()
	if _, err := node.Exec(ctx, argv...); err != nil {
		t.Fatal(err)
	}
}

// checkNoSubvolume: the btrfs filesystem at dir on node holds no subvolume
// (a volume's subvolume is deleted with it, not only emptied).
func checkNoSubvolume(ctx context.Context, t *testing.T, node *cluster.Node, dir string) {
	t.Helper()
	out, err := node.Exec(ctx, "btrfs", "subvolume", "list", dir)
	if err != nil {
		t.Errorf("listing the subvolumes of %s on %s: %v", dir, node.Name, err)
	} else if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("%s on %s still has subvolumes: %s", dir, node.Name, s)
	}
}

// linesWith is the lines of s holding part, trimmed, joined by "; ".
func linesWith(s, part string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, part) {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, "; ")
}

// ddPod is the README's writer pod (uid 1000) for claim, pinned to node,
// named name, running script.
func ddPod(name, claim, node, script string) *corev1.Pod {
	pod := writerPod(claim, c.Image(cluster.BusyboxImage))
	pod.Name = name
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	pod.Spec.Containers[0].Command = []string{"sh", "-c", script}
	return pod
}

// runOnNode runs pod to completion and returns its log. If it does not
// run, the events of its claim say why (a refused volume).
func runOnNode(ctx context.Context, t *testing.T, ns string, pod *corev1.Pod) string {
	t.Helper()
	if err := c.RunPod(ctx, ns, pod); err != nil {
		t.Fatalf("%v\nits claim's events:%s", err, claimEvents(ns, pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName))
	}
	log, err := c.PodLog(ctx, ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s:\n%s", pod.Name, log)
	return log
}

// claimEvents lists the events of a claim, for error messages.
func claimEvents(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
	defer cancel()
	claim, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return " " + err.Error()
	}
	events, err := framework.ListEvents(ctx, c.Client, claim)
	if err != nil {
		return " " + err.Error()
	}
	var s strings.Builder
	for _, ev := range events {
		fmt.Fprintf(&s, "\n  %s %s: %s", ev.Type, ev.Reason, ev.Message)
	}
	return s.String()
}

// createStorageClass creates sc and deletes it when the test ends.
func createStorageClass(ctx context.Context, t *testing.T, sc *storagev1.StorageClass) {
	t.Helper()
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := c.Client.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting StorageClass %s: %v", sc.Name, err)
		}
	})
}

// expandClaim raises the claim's request to size as a user does and waits
// until its status.capacity says size: the resizer has grown the volume.
func expandClaim(ctx context.Context, t *testing.T, ns, name, size string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("raising the request of %s/%s to %s: %v", ns, name, size, err)
	}
	want := resource.MustParse(size)
	var claim *corev1.PersistentVolumeClaim
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if claim, err = c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		got := claim.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(want) == 0, nil
	})
	if err != nil {
		var status any
		if claim != nil {
			status = claim.Status
		}
		t.Fatalf("claim %s/%s: status.capacity not %s: %v (status %+v)", ns, name, size, err, status)
	}
}

// deleteVolume deletes the pods using the claim, then the claim, and waits
// until its PV is deleted.
func deleteVolume(ctx context.Context, t *testing.T, ns, claim, pv string, pods ...string) {
	t.Helper()
	for _, pod := range pods {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv); err != nil {
		t.Fatal(err)
	}
}
