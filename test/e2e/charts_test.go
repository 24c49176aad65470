// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/helm"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// Each chart test installs one chart under charts/ as a user does with helm
// install (installChart), with only the values a user sets, into a fresh
// namespace at the Pod Security level its README asks for; then it proves
// with the backend setup of the chart's kustomize test what users observe:
// the release's provisioner ready, a claim of the release's class bound and
// its volume usable, the backend's asset there, the PV and the asset gone
// with the claim; and that uninstalling leaves none of the release's objects
// or pods, only the provisioner's empty in-flight journal (uninstall).

// TestHostpathChart installs charts/hostpath with its defaults (node-local
// mode: a DaemonSet, a WaitForFirstConsumer class). A pod writes into a
// claim of the release's class: the claim binds, the file is in the
// volume's directory on the node the pod ran on. Deleting the claim deletes
// the PV and the directory.
func TestHostpathChart(t *testing.T) {
	checkHostpathChart(t, nil)
}

// TestHostpathChartHelperPods installs charts/hostpath with mode
// helper-pods (one Deployment, local-path-provisioner's way): the chart's
// RBAC is all the provisioner has, and the helper pods it runs on the
// claim's node make and remove the directory, as in TestHostpathChart.
func TestHostpathChartHelperPods(t *testing.T) {
	checkHostpathChart(t, map[string]any{"mode": "helper-pods"})
}

// checkHostpathChart is TestHostpathChart with values.
func checkHostpathChart(t *testing.T, values map[string]any) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, err := PushImage(ctx, c, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	r := installChart(t, ctx, chartInstall{chart: "hostpath", image: ref, podSecurity: "privileged", values: values})

	claims := c.CreateTestNamespace(t, "hostpath-chart-claims")
	const name = "writer"
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(claims).Create(ctx, framework.NewPVC(claims, name, r.class(), "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RunPod(ctx, claims, writerPod(name, c.Image(cluster.BusyboxImage))); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, claims, name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || path.Dir(pv.Spec.HostPath.Path) != hostpathDir {
		t.Fatalf("PV %s has source %+v, want a hostPath under %s", pv.Name, pv.Spec.PersistentVolumeSource, hostpathDir)
	}
	pod, err := c.Client.CoreV1().Pods(claims).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.Node(pod.Spec.NodeName)
	if node == nil {
		t.Fatalf("pod %s ran on %q, not a node of the cluster", name, pod.Spec.NodeName)
	}
	log, err := c.PodLog(ctx, claims, name)
	if err != nil {
		t.Fatal(err)
	}
	checkWrittenOnNode(ctx, t, node, pv.Spec.HostPath.Path, log)

	if err := c.Client.CoreV1().Pods(claims).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(claims).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	checkGoneFromNode(ctx, t, node, hostpathDir, pv.Name)
	r.uninstall(t, ctx)
}

// TestCSIChart installs charts/csi in controller mode as its README says:
// the driver's image, name and arguments and a class. The driver is the
// in-repo test driver keeping its volumes on disk (--statedir, a directory
// per volume) in a volume of its own (driver.volumes, driver.volumeMounts). The claim of csi/deploy/example, of the release's
// class, is bound once a pod uses it (as in TestCSIProvisionAndFailover, the
// volume cannot be mounted: the driver has no node plugin), and the
// volume's directory is on the node of one of the release's pods, the
// leader's; deleting pod and claim deletes the PV and the directory.
func TestCSIChart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, driverRef := pushCSIImages(t, ctx)
	r := installChart(t, ctx, chartInstall{chart: "csi", image: ref, podSecurity: "restricted", values: map[string]any{
		"driver": map[string]any{"name": csiExampleDriver, "image": driverRef,
			"args":         []any{"--endpoint=unix:///run/csi/socket", "--statedir=" + csiChartStateDir},
			"volumes":      []any{map[string]any{"name": csiChartStateVolume, "emptyDir": map[string]any{}}},
			"volumeMounts": []any{map[string]any{"name": csiChartStateVolume, "mountPath": csiChartStateDir}}},
	}})

	claims := c.CreateTestNamespace(t, "csi-chart-claims")
	claim := r.claim(t, ctx, claims, renderedClaim(t, "csi/deploy/example", csiExampleClaim))
	pv, consumer := consumeCSIClaim(t, ctx, claims, claim.Name, csiExampleDriver)
	holders, err := r.csiVolumeHolders(ctx, pv.Spec.CSI.VolumeHandle)
	if err != nil || len(holders) != 1 {
		t.Fatalf("the release's pods whose driver has a directory for volume %s of PV %s: %v (%v), want one", pv.Spec.CSI.VolumeHandle, pv.Name, holders, err)
	}

	if err := c.Client.CoreV1().Pods(claims).Delete(ctx, consumer, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(claims).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if holders, err := r.csiVolumeHolders(ctx, pv.Spec.CSI.VolumeHandle); err != nil || len(holders) != 0 {
		t.Errorf("after PV %s was deleted, volume %s has a directory in the pods %v (%v), want in none", pv.Name, pv.Spec.CSI.VolumeHandle, holders, err)
	}
	r.uninstall(t, ctx)
}

// The test driver's --statedir in TestCSIChart, an emptyDir of the pod
// mounted into the driver's container only.
const (
	csiChartStateVolume = "driver-state"
	csiChartStateDir    = "/var/lib/csi-driver"
)

// csiVolumeHolders lists the release's pods whose driver has a directory
// for the volume of that id, looking into each pod's state emptyDir on its
// node.
func (r *chartRelease) csiVolumeHolders(ctx context.Context, id string) ([]string, error) {
	pods, err := c.Client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var holders []string
	for _, p := range pods.Items {
		node := c.Node(p.Spec.NodeName)
		if node == nil || p.DeletionTimestamp != nil {
			continue
		}
		dir := path.Join("/var/lib/kubelet/pods", string(p.UID), "volumes/kubernetes.io~empty-dir", csiChartStateVolume)
		out, err := node.Exec(ctx, "ls", "-A", dir)
		if err != nil {
			return nil, fmt.Errorf("the driver's state of pod %s, %s on %s: %w", p.Name, dir, node.Name, err)
		}
		if slices.Contains(strings.Fields(string(out)), id) {
			holders = append(holders, p.Name)
		}
	}
	return holders, nil
}

// TestCinderChart installs charts/cinder as its README says, against a real
// Cinder on the host started as for TestCinderProvisionAndISCSILogin
// (startCinder): that Cinder's cloud config (noauth) and an iscsi class. The claim of cinder/examples, of the
// release's class, binds to an iSCSI volume a node logs in to with the PV's
// CHAP Secret; deleting the claim deletes PV, Secret and Cinder volume
// (checkCinderClaim).
func TestCinderChart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	stack, ref := startCinder(t, ctx)
	r := installChart(t, ctx, chartInstall{chart: "cinder", image: ref, podSecurity: "restricted", values: map[string]any{
		"cloudConfig":  map[string]any{"config": cinderNoauthConfig(stack)},
		"storageClass": map[string]any{"parameters": map[string]any{"type": "iscsi"}},
	}})
	initiator, err := deploymentArg(r.objs, r.ns, r.workload(t).Name, "--initiator-name=")
	if err != nil {
		t.Fatal(err)
	}

	claims := c.CreateTestNamespace(t, "cinder-chart-claims")
	claim := r.claim(t, ctx, claims, renderedClaim(t, "cinder/examples", cinderExampleClaim))
	checkCinderClaim(t, ctx, stack, claims, claim.Name, initiator)
	r.uninstall(t, ctx)
}

// TestFlexChart installs charts/flex as its README says (the container
// launcher) with a class of the example driver's root, then, as the README
// asks of every class, flex/deploy/example's ConfigMap (pointed at the
// example image, in the release namespace, for the release's class) and its
// driver namespace and RBAC (for the release's ServiceAccount). The
// example's claim, of the release's class, is proved as in
// TestFlexContainerLauncherExample (checkFlexClaim): provisioning and
// delete pods on the node labeled for the share, a non-root pod's file in
// the volume's directory, PV and directory gone with the claim.
func TestFlexChart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	shareNode := c.Nodes[len(c.Nodes)-1].Name
	labelNode(t, shareNode, flexShareLabel, "true")
	ref, driverRef := pushFlexImages(t, ctx)
	r := installChart(t, ctx, chartInstall{chart: "flex", image: ref, podSecurity: "restricted", values: map[string]any{
		"storageClass": map[string]any{"parameters": map[string]any{"root": flexShare}},
	}})

	sa := r.workload(t).Pod.Spec.ServiceAccountName
	example := slices.DeleteFunc(flexExample(t, driverRef), func(obj *unstructured.Unstructured) bool {
		return obj.GetKind() == "StorageClass" || obj.GetKind() == "PersistentVolumeClaim"
	})
	for _, obj := range example {
		switch obj.GetKind() {
		case "ConfigMap":
			obj.SetNamespace(r.ns)
			obj.SetLabels(map[string]string{"storage-class": r.class(), "type": "provisioner-config"})
		case "RoleBinding":
			subjects := []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": r.ns}}
			if err := unstructured.SetNestedSlice(obj.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
	}
	installObjects(t, "flex/deploy/example", example)

	claims := c.CreateTestNamespace(t, "flex-chart-claims")
	claim := r.claim(t, ctx, claims, renderedClaim(t, "flex/deploy/example", flexExampleClaim))
	checkFlexClaim(t, ctx, claims, claim.Name, shareNode)
	// The class's ConfigMap, driver namespace and RBAC go first: they are
	// not the release's.
	if err := Remove(ctx, r.mc, example); err != nil {
		t.Fatal(err)
	}
	r.uninstall(t, ctx)
}

// TestNFSChart installs charts/nfs (server mode) as its README says, into a
// privileged namespace, with the export volume an admin's PV of a node
// directory as in TestNFSServer (nfsExportVolume), and Ganesha's grace
// period after a start shortened with extraArgs (--grace-period=10, a
// documented flag: Ganesha's log shows it arrived): the default 90 s, which
// TestNFSServer waits out with the same pod spec, would double the test.
// The claim of nfs/deploy/example, of the release's class, gets an export
// of the release's Ganesha, proved over NFSv4 and NFSv3 as in TestNFSServer
// (checkNFSServerClaim: a file written as the example pod's uid is read back
// and is on the export volume; export and directory gone with the claim).
// Helm uninstall leaves the StatefulSet's claim, with every export's data
// (NOTES.txt): the test then deletes it as a user would.
func TestNFSChart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	requireNFSClient(t)
	ref, err := PushImage(ctx, c, "nfs")
	if err != nil {
		t.Fatal(err)
	}
	r := renderChart(t, chartInstall{chart: "nfs", image: ref, podSecurity: "privileged", values: map[string]any{
		"extraArgs": []any{fmt.Sprintf("--grace-period=%d", nfsChartGrace)},
	}})
	server := r.workload(t).Name
	exportClaim := "export-" + server + "-0"
	export := nfsExportVolume(t, "e2e-nfs-chart-export", r.ns, exportClaim)
	r.install(t, ctx)

	if log := serverLog(ctx, r.ns, server+"-0"); !strings.Contains(log, fmt.Sprintf("IN GRACE, duration %d", nfsChartGrace)) {
		t.Errorf("Ganesha did not start with the grace period of extraArgs, %d s:\n%s", nfsChartGrace, log)
	}

	claims := c.CreateTestNamespace(t, "nfs-chart-claims")
	claim := r.claim(t, ctx, claims, exampleClaim(t))
	checkNFSServerClaim(t, ctx, nfsServer{export, r.ns, server + "-0", r.object(t, "Service").GetName()}, claim, "4", "3")
	r.uninstall(t, ctx)
	if err := c.Client.CoreV1().PersistentVolumeClaims(r.ns).Delete(ctx, exportClaim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVCDeleted(ctx, c.Client, r.ns, exportClaim); err != nil {
		t.Fatal(err)
	}
}

// nfsChartGrace is the grace period, in seconds, TestNFSChart sets.
const nfsChartGrace = 10

// TestNFSSubdirChart installs charts/nfs-subdir as its README says
// (nfs.server, nfs.path) into a baseline namespace. The chart mounts the
// export as an nfs volume, which no node here can mount (no NFS client):
// as in TestNFSSubdir, the share is a node directory through a claim
// (nfsShare), mounted instead by a post-render patch (helm install
// --post-renderer with a kustomization, nfsShareVolumePatch) that swaps
// only that volume. A claim of the release's class binds to its directory
// of the share, any uid writes there, and deletion archives it
// (checkNFSSubdirClaim).
func TestNFSSubdirChart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	ref, err := PushImage(ctx, c, "nfs")
	if err != nil {
		t.Fatal(err)
	}
	r := renderChart(t, chartInstall{chart: "nfs-subdir", image: ref, podSecurity: "baseline", values: map[string]any{
		"nfs": map[string]any{"server": nfsShareServer, "path": nfsSharePath},
	}})
	share := nfsShare(t, "e2e-nfs-subdir-chart-share", r.ns)
	objs, err := PostRender(r.objs, Overlay{Patches: []string{nfsShareVolumePatch(r.workload(t).Name, r.ns)}})
	if err != nil {
		t.Fatal(err)
	}
	r.objs = objs
	share.claim(t, ctx, r.ns)
	r.install(t, ctx)

	checkNFSSubdirClaim(t, ctx, r.class(), share)
	r.uninstall(t, ctx)
}

// chartInstall is what a user gives helm install.
type chartInstall struct {
	// chart is the directory under charts/.
	chart string
	// image is the provisioner's image, pushed with make push: the values
	// image.repository and image.tag.
	image string
	// podSecurity is the Pod Security level the release namespace
	// enforces, as the chart's README asks.
	podSecurity string
	// values are the user's other values (--set, -f), merged over the
	// chart's defaults; the release's StorageClass is always on, named
	// after the namespace (it is cluster-scoped: the test's own).
	values map[string]any
}

// chartReleaseName is the release name of every chart test: its objects
// are named <release>-<chart>.
const chartReleaseName = "e2e"

// chartRelease is a chart rendered for a namespace of the test's.
type chartRelease struct {
	chart string
	// ns is the release namespace, named chartNamespacePrefix<chart>-*.
	ns string
	// objs are the rendered objects, in Helm's install order.
	objs []*unstructured.Unstructured
	mc   *manifests.Client
}

// installChart is helm install: renderChart, then install.
func installChart(t *testing.T, ctx context.Context, in chartInstall) *chartRelease {
	t.Helper()
	r := renderChart(t, in)
	r.install(t, ctx)
	return r
}

// renderChart creates the release namespace at in's Pod Security level and
// renders the chart into it with in's values, as helm template does.
func renderChart(t *testing.T, in chartInstall) *chartRelease {
	t.Helper()
	ns := c.CreateTestNamespace(t, chartNamespacePrefix+in.chart)
	level := fmt.Appendf(nil, `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":%q}}}`, in.podSecurity)
	if _, err := c.Client.CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType, level, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ch, err := helm.Load(in.chart)
	if err != nil {
		t.Fatal(err)
	}
	repository, tag := splitImageRef(in.image)
	values := chartutil.MergeTables(map[string]any{
		"image":        map[string]any{"repository": repository, "tag": tag},
		"storageClass": map[string]any{"create": true, "name": ns},
	}, in.values)
	objs, err := helm.Template(ch, chartReleaseName, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	return &chartRelease{chart: in.chart, ns: ns, objs: objs, mc: newManifestsClient(t)}
}

// install creates the release's objects in order, as helm install does,
// and waits until its provisioners are ready; they are uninstalled when
// the test ends, if the test has not.
func (r *chartRelease) install(t *testing.T, ctx context.Context) {
	t.Helper()
	installObjects(t, "charts/"+r.chart, r.objs)
	w := r.workload(t)
	var err error
	switch w.Kind {
	case "Deployment":
		err = c.WaitDeploymentAvailable(ctx, r.ns, w.Name)
	case "DaemonSet":
		err = c.WaitDaemonSetReady(ctx, r.ns, w.Name)
	case "StatefulSet":
		err = c.WaitStatefulSetReady(ctx, r.ns, w.Name)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// class is the release's StorageClass.
func (r *chartRelease) class() string { return r.ns }

// workload is the release's one Deployment, DaemonSet or StatefulSet.
func (r *chartRelease) workload(t *testing.T) manifests.Workload {
	t.Helper()
	ws, err := manifests.Workloads(r.objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Fatalf("charts/%s rendered %d workloads, want 1", r.chart, len(ws))
	}
	return ws[0]
}

// object is the release's one object of kind.
func (r *chartRelease) object(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, obj := range r.objs {
		if obj.GetKind() == kind {
			found = append(found, obj)
		}
	}
	if len(found) != 1 {
		t.Fatalf("charts/%s rendered %d objects of kind %s, want 1", r.chart, len(found), kind)
	}
	return found[0]
}

// claim creates pvc (an example's) in ns, of the release's class.
func (r *chartRelease) claim(t *testing.T, ctx context.Context, ns string, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc.Namespace = ns
	pvc.Spec.StorageClassName = ptr.To(r.class())
	created, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// uninstall is helm uninstall: it deletes the rendered objects in reverse
// order (Remove: each workload's pods gone before its RBAC), then checks
// that none of them and no pod is left in the release namespace. What stays
// is what the provisioners wrote at run time and the chart's NOTES.txt
// tells users to remove: their in-flight journal ConfigMaps, which must
// hold no operation (every claim was settled before), and their leader
// election Leases.
func (r *chartRelease) uninstall(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := Remove(ctx, r.mc, r.objs); err != nil {
		t.Fatal(err)
	}
	for _, obj := range r.objs {
		res, err := r.mc.Resource(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after uninstalling, %s %s/%s: %v, want NotFound", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	pods, err := c.Client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("after uninstalling, pod %s/%s is left (%s)", r.ns, p.Name, p.Status.Phase)
	}
	cms, err := c.Client.CoreV1().ConfigMaps(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	journals := 0
	for _, cm := range cms.Items {
		switch {
		case cm.Name == "kube-root-ca.crt":
		case cm.Labels[controller.LabelManagedBy] != journalManagedBy || !strings.HasSuffix(cm.Name, "-inflight"):
			t.Errorf("after uninstalling, ConfigMap %s/%s is left, not an in-flight journal", r.ns, cm.Name)
		default:
			journals++
			for key := range cm.Data {
				// The classes its entries referred to may stay, not an entry.
				if !strings.HasPrefix(key, journalClassKeyPrefix) {
					t.Errorf("after uninstalling, the in-flight journal %s/%s holds the operation of %s, want none", r.ns, cm.Name, key)
				}
			}
		}
	}
	if journals == 0 {
		t.Errorf("after uninstalling, no in-flight journal ConfigMap in %s: NOTES.txt tells users to remove one", r.ns)
	}
}

// What lib/controller's journal writes (journal.go): its ConfigMaps' label
// app.kubernetes.io/managed-by, and the key prefix of the classes its
// entries share, which a graceful stop leaves (only entries are removed).
const (
	journalManagedBy      = "kubeprov-external-storage"
	journalClassKeyPrefix = "_class."
)
