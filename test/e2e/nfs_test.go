// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/backend/nfs"
	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
)

// What nfs/deploy and its README name.
const (
	nfsImage       = "ghcr.io/kubeprov/nfs-provisioner"
	nfsNS          = "kubeprov-nfs"
	nfsStatefulSet = "nfs-provisioner"
	nfsService     = "nfs-provisioner"
	// The StatefulSet's claim of its export volume (volumeClaimTemplates
	// "export", pod 0).
	nfsExportClaim = "export-nfs-provisioner-0"
	nfsSubdir      = "nfs-subdir-provisioner"
	// The claim of nfs/deploy/example.
	nfsExampleClaim = "shared-data"
	// The uid the README's example pod writes as.
	appUID = 1000
)

// The kernel of the test machines has no NFS client: no pod can mount an
// NFS PV here, so the README's example pod never runs. What the tests prove
// instead, from the host through the pod network: the export the
// provisioner made is served by the Ganesha in its pod, a client writing as
// the example pod's uid (libnfs, userspace) is read back and lands in the
// volume's directory on the node; deletion takes the export and the
// directory away. What they do not prove: a kubelet's NFS mount of the PV
// (mount options, the Service ClusterIP the PV names, which needs
// kube-proxy, absent here).

// TestNFSServer follows nfs/README.md's server-mode quick start: make push,
// nfs/deploy (the StatefulSet running Ganesha, rpcbind and D-Bus from the
// image built without a container engine) with only the image overridden,
// and the example's claim.
func TestNFSServer(t *testing.T) {
	ctx := framework.TestContext(t, 15*time.Minute)
	requireNFSClient(t)
	ref, err := PushImage(ctx, c, "nfs")
	if err != nil {
		t.Fatal(err)
	}
	export := nfsExportVolume(t, "e2e-nfs-export", nfsNS, nfsExportClaim)
	install(t, "nfs/deploy", ImageOverride{nfsImage, ref})
	t.Cleanup(func() { uninstallWorkload(t, "StatefulSet", nfsStatefulSet, nfsExportClaim) })
	if err := c.WaitStatefulSetReady(ctx, nfsNS, nfsStatefulSet); err != nil {
		t.Fatalf("%v\nserver log:\n%s", err, serverLog(ctx, nfsNS, nfsStatefulSet+"-0"))
	}
	if got := namespaceLevel(ctx, t, nfsNS); got != "privileged" {
		t.Errorf("namespace %s enforces Pod Security %q, want privileged (Ganesha needs DAC_READ_SEARCH)", nfsNS, got)
	}

	claim := exampleClaim(t)
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteClaim(claim) })
	checkNFSServerClaim(t, ctx, nfsServer{export, nfsNS, nfsStatefulSet + "-0", nfsService}, claim, "4", "3")
}

// nfsExport is a directory of a node that a PV makes the export volume of a
// server-mode StatefulSet or the share of subdir mode.
type nfsExport struct {
	pv   string
	node *cluster.Node
	dir  string
}

// nfsExportVolume makes, as an admin would, the export volume of the
// server-mode StatefulSet whose claim is ns/claim: the StatefulSet asks for
// it of the default class, and this cluster has none. It is a directory of
// the first node, bound in advance to the claim. Not under the node's
// /var: that is an overlay here, and Ganesha's VFS backend needs a file
// system that hands out file handles (ext4 does). When the test ends the
// claim is deleted (a StatefulSet's claims outlive it, as after helm
// uninstall), then the PV and the directory.
func nfsExportVolume(t *testing.T, pvName, ns, claim string) nfsExport {
	t.Helper()
	node := c.Nodes[0]
	dir := path.Join(node.Dir, pvName)
	nodeDirPV(t, pvName, node.Name, dir, &corev1.ObjectReference{Namespace: ns, Name: claim})
	t.Cleanup(func() {
		deleteClaim(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim}})
	})
	return nfsExport{pvName, node, dir}
}

// nfsServer is a running server-mode provisioner: its export volume, its
// namespace, its pod and the Service PVs name.
type nfsServer struct {
	nfsExport
	ns, pod, service string
}

// checkNFSServerClaim waits until claim, already created, is bound to an
// export of server, then proves what a pod would observe over NFS (see
// above): for each NFS version, a file written as the example pod's uid at
// the server pod's address is read back and is in the volume's directory of
// the export volume. Then it deletes the claim: the PV, the export and the
// directory go.
func checkNFSServerClaim(t *testing.T, ctx context.Context, server nfsServer, claim *corev1.PersistentVolumeClaim, versions ...string) {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(server.ns).Get(ctx, server.pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.Client.CoreV1().Services(server.ns).Get(ctx, server.service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, claim.Namespace, claim.Name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.NFS == nil || pv.Spec.NFS.Server != svc.Spec.ClusterIP || pv.Spec.NFS.Path != "/export/"+pv.Name {
		t.Fatalf("PV %s has source %+v, want nfs %s:/export/%s (the Service's ClusterIP)", pv.Name, pv.Spec.PersistentVolumeSource, svc.Spec.ClusterIP, pv.Name)
	}
	t.Logf("claim bound to %s (nfs %s:%s), server pod %s on %s", pv.Name, pv.Spec.NFS.Server, pv.Spec.NFS.Path, pod.Status.PodIP, pod.Spec.NodeName)

	// No kube-proxy here: the client reaches Ganesha at the pod's address,
	// which the host routes to through the node.
	for _, version := range versions {
		client := nfs.Client{Server: pod.Status.PodIP, Version: version, UID: appUID, GID: appUID}
		file := path.Join(pv.Spec.NFS.Path, "from-nfsv"+version)
		content := fmt.Sprintf("written over NFSv%s as uid %d\n", version, appUID)
		if err := nfsWriteThroughGrace(ctx, client, file, content); err != nil {
			t.Fatalf("writing into the export: %v\nserver log:\n%s", err, serverLog(ctx, server.ns, pod.Name))
		}
		if got, err := client.Read(ctx, file); err != nil || got != content {
			t.Errorf("NFSv%s read back %q (%v), want %q", version, got, err, content)
		}
		// The file is in the volume's directory of the server's export
		// volume, owned by the client's uid.
		onNode, err := server.node.Exec(ctx, "stat", "-c", "%u %s", path.Join(server.dir, pv.Name, path.Base(file)))
		if want := fmt.Sprintf("%d %d", appUID, len(content)); err != nil || strings.TrimSpace(string(onNode)) != want {
			t.Errorf("the file on the export volume: %q (%v), want uid and size %q", onNode, err, want)
		}
	}

	deleteClaim(claim)
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if out, err := (nfs.Client{Server: pod.Status.PodIP, Version: "3"}).List(ctx, pv.Spec.NFS.Path); err == nil || !strings.Contains(err.Error(), "MNT3ERR_ACCES") {
		t.Errorf("after the PV was deleted, listing its export gave %q (%v), want MNT3ERR_ACCES", out, err)
	}
	checkGoneFromNode(ctx, t, server.node, server.dir, pv.Name)
}

// The subdir-mode share of the tests: a directory of the first node standing
// in for the export (there is no NFS client to mount a real one), and what
// the provisioner and its PVs are told it is.
const (
	nfsShareClaim  = "nfs-share"
	nfsShareServer = "nfs.e2e.invalid"
	nfsSharePath   = "/srv/kubernetes"
)

// TestNFSSubdir follows the README's subdir-mode quick start: the share is
// mounted into the provisioner's pod and its server and path set, by an
// overlay as a user's own kustomization would. The share here is a
// directory of the first node through a PersistentVolume (nfsShare), which
// keeps the namespace at the baseline Pod Security level nfs/deploy/subdir
// asks for.
func TestNFSSubdir(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, err := PushImage(ctx, c, "nfs")
	if err != nil {
		t.Fatal(err)
	}
	share := nfsShare(t, "e2e-nfs-share", nfsNS)
	objs, err := RenderOverlay("nfs/deploy/subdir", Overlay{
		Images: []ImageOverride{{nfsImage, ref}},
		Patches: []string{deploymentPatch(nfsSubdir, nfsNS, fmt.Sprintf(`containers:
  - name: nfs-provisioner
    env:
      - {name: NFS_SERVER, value: %s}
      - {name: NFS_PATH, value: %s}
`, nfsShareServer, nfsSharePath)), nfsShareVolumePatch(nfsSubdir, nfsNS)},
	})
	if err != nil {
		t.Fatal(err)
	}
	mc := newManifestsClient(t)
	if err := Apply(ctx, mc, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := Remove(ctx, mc, objs); err != nil {
			t.Errorf("uninstalling nfs/deploy/subdir: %v", err)
		}
	})
	t.Cleanup(func() { uninstallWorkload(t, "Deployment", nfsSubdir, nfsShareClaim) })
	share.claim(t, ctx, nfsNS)
	if err := c.WaitDeploymentAvailable(ctx, nfsNS, nfsSubdir); err != nil {
		t.Fatal(err)
	}
	if got := namespaceLevel(ctx, t, nfsNS); got != "baseline" {
		t.Errorf("namespace %s enforces Pod Security %q, want baseline", nfsNS, got)
	}
	checkNFSSubdirClaim(t, ctx, "nfs-subdir", share)
}

// nfsShare makes the share of subdir mode: a directory of the first node,
// through a PV bound in advance to the claim nfsShareClaim in ns, which
// nfsShareVolumePatch mounts instead of the NFS export; the PV and the
// directory go when the test ends. claim creates the claim, once ns exists.
func nfsShare(t *testing.T, pvName, ns string) nfsExport {
	t.Helper()
	share := nfsExport{pvName, c.Nodes[0], path.Join("/var/lib/kubeprov-e2e", pvName)}
	nodeDirPV(t, pvName, share.node.Name, share.dir, &corev1.ObjectReference{Namespace: ns, Name: nfsShareClaim})
	return share
}

// claim creates the claim of the share nfsShare made in ns; it is deleted
// when the test ends (it goes once no pod uses it).
func (share nfsExport) claim(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	claim := framework.NewPVC(ns, nfsShareClaim, "", "1Gi")
	claim.Spec.StorageClassName = ptr.To("")
	claim.Spec.VolumeName = share.pv
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteClaim(claim) })
}

// nfsShareVolumePatch is a strategic merge patch of the subdir Deployment
// ns/name: its nfs volume becomes the claim nfsShare makes.
func nfsShareVolumePatch(name, ns string) string {
	return deploymentPatch(name, ns, fmt.Sprintf(`volumes:
  - name: nfs
    nfs: null
    persistentVolumeClaim: {claimName: %s}
`, nfsShareClaim))
}

// deploymentPatch is a strategic merge patch of the pod template of the
// Deployment ns/name: podSpec is YAML of fields of its spec.
func deploymentPatch(name, ns, podSpec string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
spec:
  template:
    spec:
%s`, name, ns, indent(podSpec, "      "))
}

// indent puts prefix before each line of text.
func indent(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

// checkNFSSubdirClaim creates a claim of class, served by a subdir-mode
// provisioner of share (nfsShare), in a namespace of the test's: it binds to
// the directory <namespace>/<claim> of the share (the class's
// pathPattern), which any uid may write into. Then it deletes the claim:
// the PV goes, the directory is archived (the class's onDelete).
func checkNFSSubdirClaim(t *testing.T, ctx context.Context, class string, share nfsExport) {
	t.Helper()
	ns := c.CreateTestNamespace(t, "nfs-subdir")
	claim := framework.NewPVC(ns, "db", class, "1Gi")
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, claim.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := path.Join(nfsSharePath, ns, claim.Name)
	if pv.Spec.NFS == nil || pv.Spec.NFS.Server != nfsShareServer || pv.Spec.NFS.Path != want {
		t.Fatalf("PV %s has source %+v, want nfs %s:%s", pv.Name, pv.Spec.PersistentVolumeSource, nfsShareServer, want)
	}
	node, dir := share.node, path.Join(share.dir, ns, claim.Name)
	if out, err := node.Exec(ctx, "stat", "-c", "%a", dir); err != nil || strings.TrimSpace(string(out)) != "777" {
		t.Fatalf("the claim's directory %s on the share: mode %q (%v), want 777 (any uid may write)", dir, out, err)
	}
	// What the example pod would write, written on the share directly.
	if _, err := node.Exec(ctx, "setpriv", "--reuid", fmt.Sprint(appUID), "--regid", fmt.Sprint(appUID), "--clear-groups",
		"sh", "-c", "date > "+path.Join(dir, "SUCCESS")); err != nil {
		t.Fatalf("uid %d cannot write into the claim's directory: %v", appUID, err)
	}

	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	// onDelete: archive renames the directory in its own parent.
	archived := path.Join(share.dir, ns, "archived-"+claim.Name)
	if _, err := node.Exec(ctx, "cat", path.Join(archived, "SUCCESS")); err != nil {
		t.Errorf("after the PV was deleted, the data is not in %s: %v", archived, err)
	}
	checkGoneFromNode(ctx, t, node, path.Dir(dir), path.Base(dir))
}

// nfsWriteThroughGrace writes as a kernel client would: retrying while a
// freshly started server is in its grace period (--grace-period, 90 s by
// default, as in the classic provisioner), when it refuses new NFSv4 opens
// (NFS4ERR_GRACE) and NFSv3 attribute changes such as a create's
// (NFS3ERR_JUKEBOX, "try again later").
func nfsWriteThroughGrace(ctx context.Context, client nfs.Client, file, content string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = client.Write(ctx, file, content)
		if last != nil && (strings.Contains(last.Error(), "GRACE") || strings.Contains(last.Error(), "JUKEBOX")) {
			return false, nil
		}
		return true, last
	})
	if last != nil {
		return last
	}
	return err
}

// uninstallWorkload deletes, as a user uninstalling does, the workload of
// nfsNS, waits until its pods are gone, then deletes the claims it used
// (a StatefulSet's claims outlive it) and waits until they are gone too:
// Remove finalizes the namespace at once, which would leave them behind.
func uninstallWorkload(t *testing.T, kind, name string, claims ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	switch kind {
	case "StatefulSet":
		err = c.Client.AppsV1().StatefulSets(nfsNS).Delete(ctx, name, metav1.DeleteOptions{})
	case "Deployment":
		err = c.Client.AppsV1().Deployments(nfsNS).Delete(ctx, name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting %s %s: %v", kind, name, err)
	}
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(nfsNS).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("the pods of %s %s are not gone: %v", kind, name, err)
	}
	for _, claim := range claims {
		if err := c.Client.CoreV1().PersistentVolumeClaims(nfsNS).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting claim %s: %v", claim, err)
		}
		err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().PersistentVolumeClaims(nfsNS).Get(ctx, claim, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("claim %s is not gone: %v", claim, err)
		}
	}
}

// nodeDirPV creates, as an admin would, a PersistentVolume of a directory of
// a node, bound in advance to claim; it and the directory go when the test
// ends.
func nodeDirPV(t *testing.T, name, node, dir string, claim *corev1.ObjectReference) *corev1.PersistentVolume {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      claim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	created, err := c.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The claim goes with its namespace, after the pods using it
		// (Ganesha's grace period to stop): the PV waits for it.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting PV %s: %v", name, err)
		}
		if err := framework.WaitForPVDeleted(ctx, c.Client, name); err != nil {
			t.Error(err)
		}
		for _, n := range c.Nodes {
			if n.Name == node {
				if _, err := n.Exec(context.Background(), "rm", "-rf", dir); err != nil {
					t.Error(err)
				}
			}
		}
	})
	return created
}

// exampleClaim is the claim of nfs/deploy/example (its pod cannot run
// here: see above).
func exampleClaim(t *testing.T) *corev1.PersistentVolumeClaim {
	t.Helper()
	return renderedClaim(t, "nfs/deploy/example", nfsExampleClaim)
}

// deleteClaim deletes a claim if it is still there.
func deleteClaim(pvc *corev1.PersistentVolumeClaim) {
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
	defer cancel()
	_ = c.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{})
}

// namespaceLevel is the Pod Security level the namespace enforces.
func namespaceLevel(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	n, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels["pod-security.kubernetes.io/enforce"]
}

// serverLog is the server pod's log, for failure messages.
func serverLog(ctx context.Context, ns, pod string) string {
	log, err := c.PodLog(ctx, ns, pod)
	if err != nil {
		return err.Error()
	}
	return log
}

// requireNFSClient fails the test if libnfs's userspace client, which
// stands in for a kernel NFS client here, is not installed.
func requireNFSClient(t *testing.T) {
	t.Helper()
	if missing := missingTools(nfs.ClientTools...); len(missing) > 0 {
		t.Fatalf("missing %v: hack/deps/nfs.sh installs libnfs-utils", missing)
	}
}

func missingTools(tools ...string) []string {
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	return missing
}
