// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

const (
	hostpathImage = "ghcr.io/kubeprov/hostpath-provisioner"
	// hostpathDir is where the README says volumes live on the node.
	hostpathDir = "/var/lib/hostpath-provisioner"
	// The names of hostpath/deploy/example.
	exampleName = "hostpath-example"
	exampleNS   = "default"
	hostpathNS  = "kubeprov-hostpath"
)

// TestHostpathSingleNode follows hostpath/README.md on a one-node cluster:
// make push, apply deploy/single-node with the image overridden, apply
// deploy/example (a claim and a non-root pod writing /mnt/SUCCESS), then
// look for the file in the volume's directory on the node; delete the pod
// and the claim: the PV and the directory go.
func TestHostpathSingleNode(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	mc := installSingleNode(ctx, t)

	example, err := Render("hostpath/deploy/example", ImageOverride{"busybox", c.Image(cluster.BusyboxImage)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, mc, example); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPodPhase(ctx, exampleNS, exampleName, "Succeeded"); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, exampleNS, exampleName)
	if err != nil {
		t.Fatal(err)
	}
	log, err := c.PodLog(ctx, exampleNS, exampleName)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != hostpathDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, hostpathDir)
	}
	node := c.Nodes[0]
	checkWrittenOnNode(ctx, t, node, pv.Spec.HostPath.Path, log)

	if err := Remove(ctx, mc, example); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	checkGoneFromNode(ctx, t, node, hostpathDir, pv.Name)
}

// The facts of the original hostPath walkthrough, "Writing an out-of-tree
// dynamic provisioner" (kubernetes-incubator/external-storage,
// docs/demo/hostpath-provisioner), that its users type again here.
const (
	walkthroughClass = "example-hostpath"
	walkthroughClaim = "hostpath"
	walkthroughPod   = "test-pod"
	walkthroughNS    = "default"
)

// TestHostpathWalkthrough replays that walkthrough against the single-node
// mode on one real node: its class (named example-hostpath, for our
// provisioner), its claim (1Mi, ReadWriteMany, the class given only by the
// volume.beta.kubernetes.io/storage-class annotation) and its busybox pod
// (/bin/sh -c "touch /mnt/SUCCESS && exit 0 || exit 1", root, no security
// context). The pod succeeds, SUCCESS is in the PV's directory on the node;
// deleting the claim removes the PV and the directory.
func TestHostpathWalkthrough(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	installSingleNode(ctx, t)
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: walkthroughClass}, Provisioner: "kubeprov.io/hostpath"}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		_ = c.Client.CoreV1().Pods(walkthroughNS).Delete(ctx, walkthroughPod, metav1.DeleteOptions{})
		_ = c.Client.CoreV1().PersistentVolumeClaims(walkthroughNS).Delete(ctx, walkthroughClaim, metav1.DeleteOptions{})
		_ = c.Client.StorageV1().StorageClasses().Delete(ctx, walkthroughClass, metav1.DeleteOptions{})
	})

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: walkthroughClaim, Annotations: map[string]string{corev1.BetaStorageClassAnnotation: walkthroughClass}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(walkthroughNS).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, walkthroughNS, walkthroughClaim)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.StorageClassName != walkthroughClass || !slices.Equal(pv.Spec.AccessModes, claim.Spec.AccessModes) {
		t.Errorf("PV %s: class %q, access modes %v; want %s, [ReadWriteMany]", pv.Name, pv.Spec.StorageClassName, pv.Spec.AccessModes, walkthroughClass)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: walkthroughPod},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:         walkthroughPod,
				Image:        c.Image(cluster.BusyboxImage),
				Command:      []string{"/bin/sh"},
				Args:         []string{"-c", "touch /mnt/SUCCESS && exit 0 || exit 1"},
				VolumeMounts: []corev1.VolumeMount{{Name: "hostpath-pvc", MountPath: "/mnt"}},
			}},
			Volumes: []corev1.Volume{{Name: "hostpath-pvc", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: walkthroughClaim},
			}}},
		},
	}
	if err := c.RunPod(ctx, walkthroughNS, pod); err != nil {
		t.Fatal(err)
	}
	node := c.Nodes[0]
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != hostpathDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, hostpathDir)
	}
	if out, err := node.Exec(ctx, "ls", "-A", pv.Spec.HostPath.Path); err != nil || strings.TrimSpace(string(out)) != "SUCCESS" {
		t.Fatalf("%s on %s holds %q (%v), want the pod's SUCCESS", pv.Spec.HostPath.Path, node.Name, out, err)
	}

	if err := c.Client.CoreV1().Pods(walkthroughNS).Delete(ctx, walkthroughPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(walkthroughNS).Delete(ctx, walkthroughClaim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	checkGoneFromNode(ctx, t, node, hostpathDir, pv.Name)
}

// TestHostpathNodeLocal follows the README's default mode on two nodes: the
// provisioner DaemonSet (hostpath/deploy) and a WaitForFirstConsumer class.
// Each claim's directory is made on the node the scheduler picked for its
// pod, and only there.
func TestHostpathNodeLocal(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	if len(c.Nodes) < 2 {
		t.Fatalf("the cluster has %d node(s), this test needs 2", len(c.Nodes))
	}
	installHostpath(t, "hostpath/deploy")
	if err := c.WaitDaemonSetReady(ctx, hostpathNS, "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}
	ns := c.CreateTestNamespace(t, "node-local")
	for _, n := range c.Nodes {
		name := "on-" + n.Name
		if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, "hostpath", "1Gi"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The README's example pod, asking the scheduler for this node.
		pod := writerPod(name, c.Image(cluster.BusyboxImage))
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n.Name}
		if err := c.RunPod(ctx, ns, pod); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range c.Nodes {
		name := "on-" + n.Name
		_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		file := path.Join(pv.Spec.HostPath.Path, "SUCCESS")
		if _, err := n.Exec(ctx, "cat", file); err != nil {
			t.Errorf("claim %s: the pod's file is not on %s, where its pod ran: %v", name, n.Name, err)
		}
		other := c.Nodes[(i+1)%len(c.Nodes)]
		checkNeverOnNode(ctx, t, other, hostpathDir, pv.Name)
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
			t.Fatal(err)
		}
		checkGoneFromNode(ctx, t, n, hostpathDir, pv.Name)
	}
}

// checkWrittenOnNode checks that the SUCCESS file a writer pod wrote, and
// printed as podLog, is in dir on node: the volume is that directory.
func checkWrittenOnNode(ctx context.Context, t *testing.T, node *cluster.Node, dir, podLog string) {
	t.Helper()
	onNode, err := node.Exec(ctx, "cat", path.Join(dir, "SUCCESS"))
	if err != nil {
		t.Fatalf("the pod's file is not in the volume's directory on %s: %v", node.Name, err)
	}
	if strings.TrimSpace(string(onNode)) == "" || string(onNode) != podLog {
		t.Errorf("SUCCESS on %s holds %q, the pod printed %q", node.Name, onNode, podLog)
	}
}

// checkGoneFromNode: dir on node no longer holds an entry name (with name
// "", no entry at all), the counterpart of checkWrittenOnNode. A dir that
// cannot be listed fails too: a check that never looked proves nothing.
func checkGoneFromNode(ctx context.Context, t *testing.T, node *cluster.Node, dir, name string) {
	t.Helper()
	if out, err := node.Exec(ctx, "ls", "-A", dir); err != nil {
		t.Errorf("listing %s on %s: %v (%s)", dir, node.Name, err, out)
	} else if holds(out, name) {
		t.Errorf("%s on %s still holds %q, want no %s", dir, node.Name, out, cmp.Or(name, "entry"))
	}
}

// checkNeverOnNode: dir on node, a node the volume's pod did not run on,
// holds no entry name; a dir that does not exist there holds none.
func checkNeverOnNode(ctx context.Context, t *testing.T, node *cluster.Node, dir, name string) {
	t.Helper()
	if out, err := node.Exec(ctx, "ls", "-A", dir); err == nil && holds(out, name) {
		t.Errorf("%s on %s holds %s too, where its pod did not run", dir, node.Name, name)
	}
}

// holds tells whether ls output has an entry that is name or starts with it
// (local-path's <pv>_<namespace>_<claim>), or any entry for name "".
func holds(ls []byte, name string) bool {
	return slices.ContainsFunc(strings.Fields(string(ls)), func(entry string) bool { return strings.HasPrefix(entry, name) })
}

// writerPod is the README's example pod (deploy/example/pod.yaml) for the
// claim of the same name.
func writerPod(name, busybox string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:    "writer",
				Image:   busybox,
				Command: []string{"sh", "-c", "date > /mnt/SUCCESS && cat /mnt/SUCCESS"},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                ptr.To[int64](1000),
					AllowPrivilegeEscalation: ptr.To(false),
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/mnt"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
			}}},
		},
	}
}

// installSingleNode installs deploy/single-node on one node, as the README
// asks of this mode (the others are cordoned), and waits until it is
// available.
func installSingleNode(ctx context.Context, t *testing.T) *manifests.Client {
	t.Helper()
	for _, n := range c.Nodes[1:] {
		cordon(t, n.Name)
	}
	mc := installHostpath(t, "hostpath/deploy/single-node")
	if err := c.WaitDeploymentAvailable(ctx, hostpathNS, "hostpath-provisioner"); err != nil {
		t.Fatal(err)
	}
	return mc
}

// installHostpath pushes the hostpath image and applies the kustomization
// at dir with only the image overridden, as the README tells users; the
// test's end uninstalls it.
func installHostpath(t *testing.T, dir string) *manifests.Client {
	t.Helper()
	ref, err := PushImage(t.Context(), c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	install(t, dir, ImageOverride{hostpathImage, ref})
	return newManifestsClient(t)
}

// newManifestsClient is a client of any kind, as the cluster's admin.
func newManifestsClient(t *testing.T) *manifests.Client {
	t.Helper()
	mc, err := manifests.NewClient(c.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// cordon marks a node unschedulable until the test ends.
func cordon(t *testing.T, node string) {
	t.Helper()
	set := func(ctx context.Context, unschedulable bool) error {
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := set(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := set(ctx, false); err != nil {
			t.Errorf("uncordoning %s: %v", node, err)
		}
	})
}
