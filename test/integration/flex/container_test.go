// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/kubeletsim"
)

// Images the simulated kubelet knows: what the example Dockerfile builds,
// the same entrypoint around the test driver, and images of single scripts.
const (
	imageHostdir  = "registry.example.com/flex-hostdir:v1"
	imageTest     = "registry.example.com/flex-test:v1"
	imageCreatePV = "registry.example.com/flex-create-pv:v1"
	imageStderr   = "registry.example.com/flex-stderr:v1"
)

func images() map[string]kubeletsim.Image {
	return map[string]kubeletsim.Image{
		imageHostdir:  {Command: []string{"sh", entrypoint}, Env: []string{"FLEX_DRIVER=" + hostdirDriver}},
		imageTest:     {Command: []string{"sh", entrypoint}, Env: []string{"FLEX_DRIVER=" + testDriver}},
		imageCreatePV: {Command: []string{"sh", createPV}},
		// Fails without a termination message: the event shows the log tail.
		imageStderr: {Command: []string{"sh", "-c", "echo 'cannot reach array 192.0.2.5: connection refused' >&2; exit 3"}},
	}
}

type podEnv struct {
	name string // provisioner name
	ns   string // claims
	work string // the provisioner's namespace: ConfigMaps and pods
	root string // the drivers' root
	sim  *kubeletsim.Sim
	// restart stops the provisioner and starts another in its place.
	restart func()
}

// containerSetup starts a kubelet simulator with nodes (name suffix ->
// labels) and a container-launcher provisioner.
func containerSetup(t *testing.T, deadline, startTimeout time.Duration, nodes map[string]map[string]string) *podEnv {
	t.Helper()
	requireTools(t, "sh", "jq")
	ctx := framework.TestContext(t, testTimeout)
	e := &podEnv{
		name: "test.kubeprov.io/" + uniqueName(t, "flex"),
		ns:   cp.CreateTestNamespace(t, "flex"),
		work: cp.CreateTestNamespace(t, "flex-work"),
		root: t.TempDir(),
	}
	named := map[string]map[string]string{}
	for suffix, l := range nodes {
		named[e.ns+"-"+suffix] = l
	}
	e.sim = startSim(t, ctx, named)
	key, err := flex.LoadRecordKey(ctx, client(t), e.work)
	if err != nil {
		t.Fatal(err)
	}
	start := func() func() {
		l := &flex.PodLauncher{Client: client(t), Namespace: e.work, Deadline: deadline, StartTimeout: startTimeout, RecordKey: key}
		return startController(t, e.name, newProvisioner(t, e.name, "id-"+e.ns, l, "kubeprov~test"), e.work, "ctrl-"+e.ns)
	}
	stop := start()
	e.restart = func() {
		stop()
		stop = start()
	}
	return e
}

// startSim runs a kubelet simulator with the given nodes until the test ends.
func startSim(t *testing.T, ctx context.Context, nodes map[string]map[string]string) *kubeletsim.Sim {
	t.Helper()
	sim := kubeletsim.StartForTest(t, cp.RestConfig(), images())
	for node, l := range nodes {
		if err := sim.AddNode(ctx, node, l); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client(t).CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	}
	return sim
}

func (e *podEnv) configMap(t *testing.T, ctx context.Context, ns, name string, labels, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
	if _, err := client(t).CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runs returns the simulator's runs of one action.
func (e *podEnv) runs(action string) []kubeletsim.Run {
	var out []kubeletsim.Run
	for _, r := range e.sim.Runs() {
		if r.Pod.Labels[flex.LabelAction] == action {
			out = append(out, r)
		}
	}
	return out
}

// expectNoPods waits until the provisioner has cleaned up every pod in ns.
func expectNoPods(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	if err := framework.WaitForNoPods(ctx, client(t), ns, ""); err != nil {
		t.Fatal(err)
	}
}

func envOf(pod *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// The example image, configured by a ConfigMap found by the design's labels:
// it answers through its termination message, runs on the node its
// node-selector picks, gets the ConfigMap's extra properties, and deletes
// with the same image.
func TestContainerTerminationMessageNodeSelectorAndDelete(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"plain": nil, "ssd": {"disk": "ssd"}})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{"root": e.root}))
	e.configMap(t, ctx, e.work, "hostdir", map[string]string{flex.LabelStorageClass: class.Name, flex.LabelType: flex.TypeProvisionerConfig}, map[string]string{
		flex.ConfigImage:          imageHostdir,
		flex.ConfigNodeSelector:   "disk=ssd",
		flex.ConfigHostPath:       e.root,
		flex.ConfigActiveDeadline: "60",
		"zone":                    "west",
	})
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")

	_, pv, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		t.Errorf("PV source = %+v, want hostPath %s", pv.Spec.PersistentVolumeSource, dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("volume directory: %v", err)
	}
	in := expectAnnotations(t, pv, e.name, "id-"+e.ns, "container")
	if in["zone"] != "west" || in["root"] != e.root {
		t.Errorf("recorded input lacks the ConfigMap property or class parameter: %v", in)
	}
	var cfg flex.PodConfig
	if err := json.Unmarshal([]byte(pv.Annotations[flex.AnnPod]), &cfg); err != nil || cfg.Image != imageHostdir || cfg.NodeSelector["disk"] != "ssd" || cfg.Namespace != e.work {
		t.Errorf("annotation %s = %q (%v)", flex.AnnPod, pv.Annotations[flex.AnnPod], err)
	}

	runs := e.runs(flex.ActionProvision)
	if len(runs) != 1 {
		t.Fatalf("%d provision pods ran, want 1", len(runs))
	}
	r := runs[0]
	if r.Node != e.ns+"-ssd" {
		t.Errorf("provision pod ran on %s, want the node matching disk=ssd", r.Node)
	}
	if r.Pod.Name != flex.PodName(flex.ActionProvision, pv.Name) || r.Pod.Namespace != e.work || r.Pod.Labels[flex.LabelPV] != pv.Name {
		t.Errorf("provision pod %s/%s, labels %v", r.Pod.Namespace, r.Pod.Name, r.Pod.Labels)
	}
	if d := r.Pod.Spec.ActiveDeadlineSeconds; d == nil || *d != 60 {
		t.Errorf("activeDeadlineSeconds = %v, want 60", d)
	}
	env := envOf(r.Pod)
	for k, v := range map[string]string{"FLEX_ACTION": "provision", "FLEX_PARAM_ZONE": "west", "FLEX_PVC_NAME": "data", "FLEX_PVC_NAMESPACE": e.ns, "FLEX_PV_NAME": pv.Name, "FLEX_REQUEST_GIB": "1"} {
		if env[k] != v {
			t.Errorf("pod env %s = %q, want %q", k, env[k], v)
		}
	}
	if len(r.Pod.OwnerReferences) != 0 {
		t.Errorf("a pod outside the claim's namespace must not be owned by the claim: %v", r.Pod.OwnerReferences)
	}
	expectNoPods(t, ctx, e.work)

	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	if dirs := volumeDirs(t, e.root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
	runs = e.runs(flex.ActionDelete)
	if len(runs) != 1 {
		t.Fatalf("%d delete pods ran, want 1", len(runs))
	}
	owners := runs[0].Pod.OwnerReferences
	if len(owners) != 1 || owners[0].Kind != "PersistentVolume" || owners[0].Name != pv.Name || owners[0].UID != pv.UID {
		t.Errorf("delete pod owners = %v, want the PV", owners)
	}
	if env := envOf(runs[0].Pod); env["FLEX_ACTION"] != "delete" || env["FLEX_PARAM_ZONE"] != "west" || runs[0].Node != e.ns+"-ssd" {
		t.Errorf("delete pod env %v on node %s", env, runs[0].Node)
	}
	expectNoPods(t, ctx, e.work)
}

// The pod creates the PV itself with its service account (RBAC: create
// persistentvolumes only); the provisioner adopts it, and deletes it later.
func TestContainerPodCreatesPV(t *testing.T) {
	requireTools(t, "curl")
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	c := client(t)
	if _, err := c.CoreV1().ServiceAccounts(e.work).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pv-maker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := e.work + "-pv-maker"
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.work, Name: "pv-maker"}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.RbacV1().ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{})
	})
	if err := framework.WaitUntilAuthorized(ctx, c, binding); err != nil {
		t.Fatal(err)
	}
	e.configMap(t, ctx, e.work, "maker", nil, map[string]string{flex.ConfigImage: imageCreatePV, flex.ConfigServiceAccountName: "pv-maker"})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{flex.ParamProvisionerConfig: e.work + "/maker"}))
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "2Gi")

	if _, _, err := framework.WaitForPVCBound(ctx, c, e.ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
	// The binder may bind the pod's PV before the provisioner adopts it.
	var pv *corev1.PersistentVolume
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		pv, err = c.CoreV1().PersistentVolumes().Get(ctx, pvNameOf(pvc), metav1.GetOptions{})
		return err == nil && pv.Annotations[flex.AnnIdentity] != "", nil
	}); err != nil {
		t.Fatalf("the provisioner never adopted PV %s: %v", pvNameOf(pvc), err)
	}
	if _, err := framework.WaitForEvent(ctx, c, pvc, "ProvisioningSucceeded"); err != nil {
		t.Fatal(err)
	}
	if pv.Annotations["example.com/made-by"] != "provisioning-pod" || pv.Spec.NFS == nil || pv.Spec.NFS.Path != "/exports/"+pv.Name {
		t.Fatalf("PV %s was not the one the pod made: annotations %v, source %+v", pv.Name, pv.Annotations, pv.Spec.PersistentVolumeSource)
	}
	expectAnnotations(t, pv, e.name, "id-"+e.ns, "container")
	if r := e.runs(flex.ActionProvision); len(r) != 1 || r[0].ExitCode != 0 {
		t.Fatalf("provision runs: %+v", r)
	}
	expectNoPods(t, ctx, e.work)

	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	if r := e.runs(flex.ActionDelete); len(r) != 1 || r[0].ExitCode != 0 {
		t.Fatalf("delete runs: %+v", r)
	}
	expectNoPods(t, ctx, e.work)
}

// A failed pod's exit code and termination message (or, without one, its
// log tail) are in the ProvisioningFailed event.
func TestContainerFailureInEvent(t *testing.T) {
	for _, tc := range []struct {
		name, image, mode string
		want              []string
	}{
		{"termination-message", imageTest, "fail", []string{"failed with exit code 1: Failure: pool gold has no space left for 1Gi"}},
		{"log-tail", imageStderr, "", []string{"failed with exit code 3: cannot reach array 192.0.2.5: connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := framework.TestContext(t, testTimeout)
			e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
			e.configMap(t, ctx, e.work, "cfg", nil, map[string]string{flex.ConfigImage: tc.image})
			class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{
				flex.ParamProvisionerConfig: "cfg", "root": e.root, "mode": tc.mode,
			}))
			pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
			msg := waitForEventContaining(t, ctx, pvc, "ProvisioningFailed", append(tc.want, "provision pod "+e.work+"/"+flex.PodName(flex.ActionProvision, pvNameOf(pvc)))...)
			t.Logf("event: %s", msg)
			if err := client(t).CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			expectNoPods(t, ctx, e.work)
		})
	}
}

// The class's secret is a read-only file in the pod, never an environment
// variable or an annotation; pods in the claim's namespace are owned by it.
func TestContainerSecretAndClaimOwner(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	const secretValue = "s3cr3t-Value-42"
	if _, err := client(t).CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "backend"}, StringData: map[string]string{"password": secretValue},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.configMap(t, ctx, e.work, "cfg", nil, map[string]string{flex.ConfigImage: imageTest, flex.ConfigNamespace: e.ns})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{
		flex.ParamProvisionerConfig: "cfg", flex.ParamSecretName: "backend", "root": e.root, "mode": "secret",
	}))
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitForFile(t, ctx, filepath.Join(e.root, pv.Name, "secret-check")); strings.TrimSpace(got) != "readable" {
		t.Errorf("the driver could not read the secret file: %q", got)
	}
	for k, v := range pv.Annotations {
		if strings.Contains(v, secretValue) {
			t.Errorf("PV annotation %s holds the secret", k)
		}
	}
	runs := e.runs(flex.ActionProvision)
	if len(runs) != 1 {
		t.Fatalf("%d provision pods ran", len(runs))
	}
	pod := runs[0].Pod
	for k, v := range envOf(pod) {
		if strings.Contains(v, secretValue) {
			t.Errorf("pod env %s holds the secret", k)
		}
	}
	if m := pod.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != flex.SecretMountPath || !m[0].ReadOnly {
		t.Errorf("volume mounts = %+v", m)
	}
	if o := pod.OwnerReferences; len(o) != 1 || o[0].Kind != "PersistentVolumeClaim" || o[0].UID != pvc.UID {
		t.Errorf("owners = %+v, want the claim", o)
	}
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	expectNoPods(t, ctx, e.ns)
}

// A pod killed at activeDeadlineSeconds may have done its work: provisioning
// runs again (a new pod) until it answers.
func TestContainerDeadline(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	e.configMap(t, ctx, e.work, "cfg", nil, map[string]string{flex.ConfigImage: imageTest, flex.ConfigActiveDeadline: "2", flex.ConfigHostPath: e.root})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{flex.ParamProvisionerConfig: "cfg", "root": e.root, "mode": "slow"}))
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")

	waitForEventContaining(t, ctx, pvc, "ProvisioningFailed", "still in progress, will retry", "exceeded its deadline of 2s")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	runs := e.runs(flex.ActionProvision)
	if len(runs) != 2 || !runs[0].DeadlineExceeded || runs[1].DeadlineExceeded || runs[1].ExitCode != 0 {
		t.Fatalf("provision runs: first must exceed its deadline, second succeed: %+v", runs)
	}
	pid, err := strconv.Atoi(trimNL(waitForFile(t, ctx, filepath.Join(e.root, "slow-child.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return syscall.Kill(pid, 0) == syscall.ESRCH, nil
	}); err != nil {
		t.Errorf("the killed pod's child process %d survived", pid)
	}
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	expectNoPods(t, ctx, e.work)
}

// A provisioner replaced while its provisioning pod runs (a rolling update,
// an eviction) waits on that pod: it is the pod this provisioner creates,
// though the API server gave it the "default" service account. One pod
// runs, the claim binds, and no attempt calls the pod foreign.
func TestContainerProvisionerReplacedWhilePodRuns(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	e.configMap(t, ctx, e.work, "cfg", nil, map[string]string{flex.ConfigImage: imageTest, flex.ConfigHostPath: e.root})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{flex.ParamProvisionerConfig: "cfg", "root": e.root, "mode": "flex"}))
	hang := filepath.Join(e.root, "hang")
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	podName := flex.PodName(flex.ActionProvision, "pvc-"+string(pvc.UID))
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod, err := client(t).CoreV1().Pods(e.work).Get(ctx, podName, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("provision pod %s/%s is not running: %v", e.work, podName, err)
	}
	if pod, err := client(t).CoreV1().Pods(e.work).Get(ctx, podName, metav1.GetOptions{}); err != nil || pod.Spec.ServiceAccountName != "default" {
		t.Fatalf("the API server did not give the pod the default service account (%v): the test proves nothing", err)
	}

	e.restart()
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if runs := e.runs(flex.ActionProvision); len(runs) != 1 {
		t.Errorf("%d provision pods ran, want 1: %+v", len(runs), runs)
	}
	events, err := client(t).CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(pvc.UID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "is not the provision pod") {
			t.Errorf("the replacement called its own pod foreign: %s", ev.Message)
		}
	}
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	expectNoPods(t, ctx, e.work)
}

// A pod that is never scheduled is given up after --pod-start-timeout with
// the scheduler's reason, and removed. (An image that cannot be pulled is
// the kubelet's to report, and a real kubelet fails the pod at its
// activeDeadlineSeconds, which counts the pull: test/e2e's
// TestFlexContainerLauncherFailures.)
func TestContainerPodNeverStarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want []string
	}{
		{"unschedulable", map[string]string{flex.ConfigImage: imageTest, flex.ConfigNodeSelector: "disk=nvme"},
			[]string{"did not start within 1s", "didn't match Pod's node affinity/selector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := framework.TestContext(t, testTimeout)
			e := containerSetup(t, time.Second, time.Second, map[string]map[string]string{"node": {"disk": "ssd"}})
			e.configMap(t, ctx, e.work, "cfg", nil, tc.data)
			class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{flex.ParamProvisionerConfig: "cfg", "root": e.root, "mode": "flex"}))
			pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
			waitForEventContaining(t, ctx, pvc, "ProvisioningFailed", tc.want...)
			if err := client(t).CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			expectNoPods(t, ctx, e.work)
			if r := e.sim.Runs(); len(r) != 0 {
				t.Errorf("pods ran: %+v", r)
			}
		})
	}
}

// A pod of the provisioning pod's name and labels that someone else created
// in the pods' namespace is not used, whatever it answers: the claim gets a
// Warning event and no PV, and the planted pod is left alone.
func TestContainerPlantedPodIsNotUsed(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{"root": e.root}))
	// No ConfigMap yet: provisioning waits, and the tenant learns the PV name.
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	if _, err := framework.WaitForEvent(ctx, client(t), pvc, "ProvisioningFailed"); err != nil {
		t.Fatal(err)
	}
	pvName := "pvc-" + string(pvc.UID)
	planted := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.work, Name: flex.PodName(flex.ActionProvision, pvName),
			Labels: map[string]string{flex.LabelManagedBy: flex.ManagedBy, flex.LabelAction: flex.ActionProvision, flex.LabelPV: pvName}},
		Spec: corev1.PodSpec{
			NodeName:      "nowhere", // never runs: what matters is that it exists
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: flex.ContainerName, Image: imageHostdir,
				Command: []string{"sh", "-c", `echo '{"status":"Success","volume":{"hostPath":{"path":"/"}}}' >/dev/termination-log`}}},
		},
	}
	if _, err := client(t).CoreV1().Pods(e.work).Create(ctx, planted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.configMap(t, ctx, e.work, "hostdir", map[string]string{flex.LabelStorageClass: class.Name, flex.LabelType: flex.TypeProvisionerConfig}, map[string]string{
		flex.ConfigImage: imageHostdir, flex.ConfigHostPath: e.root,
	})
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, client(t), pvc)
		for _, ev := range events {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "is not the provision pod this provisioner creates") {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("no Warning event about the planted pod: %v", err)
	}
	if _, err := client(t).CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err == nil {
		t.Fatal("a PV was made from the planted pod")
	}
	if _, err := client(t).CoreV1().Pods(e.work).Get(ctx, planted.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the planted pod was deleted by the provisioner: %v", err)
	}
	// Once it is gone, the provisioner's own pod provisions the claim.
	if err := client(t).CoreV1().Pods(e.work).Delete(ctx, planted.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
}

// A pod-template in the ConfigMap reaches the pods the API server stores
// (tolerations, affinity, resources, priority class, both securityContexts,
// its nodeSelector), the delete pod gets the template recorded at provision
// time even after the ConfigMap changed, and a template with a forbidden
// field is refused in a Warning event naming the ConfigMap, key and field.
func TestContainerPodTemplate(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"plain": nil, "storage": {"tier": "storage"}})
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t, "pc")}, Value: 1000}
	if _, err := client(t).SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client(t).SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	// The provisioner's pods are admitted only once the Priority admission's
	// informer has seen the class: a pod of the same namespace and class
	// stands in for them.
	if err := framework.WaitUntilPodAdmitted(ctx, client(t), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.work, Name: "priority-probe"},
		Spec: corev1.PodSpec{PriorityClassName: pc.Name, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "probe", Image: imageHostdir}}},
	}); err != nil {
		t.Fatal(err)
	}
	template := `
spec:
  priorityClassName: ` + pc.Name + `
  tolerations:
  - {key: dedicated, operator: Equal, value: storage, effect: NoSchedule}
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions:
          - {key: tier, operator: In, values: [storage]}
  securityContext:
    fsGroup: 2000
  nodeSelector:
    tier: storage
  containers:
  - name: driver
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {memory: 128Mi}
    securityContext:
      runAsUser: 1000
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
      seccompProfile: {type: RuntimeDefault}
`
	e.configMap(t, ctx, e.work, "tpl", nil, map[string]string{
		flex.ConfigImage: imageHostdir, flex.ConfigHostPath: e.root, flex.ConfigPodTemplate: template,
	})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{
		flex.ParamProvisionerConfig: "tpl", "root": e.root,
	}))
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	check := func(r kubeletsim.Run) {
		t.Helper()
		s := r.Pod.Spec
		if r.Node != e.ns+"-storage" {
			t.Errorf("%s pod ran on %s, want the node the template's nodeSelector picks", r.Pod.Labels[flex.LabelAction], r.Node)
		}
		if s.PriorityClassName != pc.Name || s.Priority == nil || *s.Priority != pc.Value {
			t.Errorf("priorityClassName %q priority %v, want %s (%d)", s.PriorityClassName, s.Priority, pc.Name, pc.Value)
		}
		found := false
		for _, tol := range s.Tolerations {
			found = found || tol.Key == "dedicated" && tol.Value == "storage" && tol.Effect == corev1.TaintEffectNoSchedule
		}
		if !found {
			t.Errorf("tolerations %+v lack the template's", s.Tolerations)
		}
		if s.Affinity == nil || s.Affinity.NodeAffinity == nil || len(s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("affinity = %+v", s.Affinity)
		}
		if s.SecurityContext == nil || ptr.Deref(s.SecurityContext.FSGroup, 0) != 2000 {
			t.Errorf("pod securityContext = %+v", s.SecurityContext)
		}
		c := s.Containers[0]
		if c.Resources.Requests.Cpu().String() != "100m" || c.Resources.Limits.Memory().String() != "128Mi" {
			t.Errorf("resources = %+v", c.Resources)
		}
		if sc := c.SecurityContext; sc == nil || ptr.Deref(sc.RunAsUser, -1) != 1000 || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
			t.Errorf("container securityContext = %+v", sc)
		}
		if s.HostNetwork || len(s.Volumes) != 1 || s.Volumes[0].HostPath == nil || s.Volumes[0].HostPath.Path != e.root || c.Image != imageHostdir {
			t.Errorf("the provisioner's own fields changed: volumes %+v image %s", s.Volumes, c.Image)
		}
	}
	runs := e.runs(flex.ActionProvision)
	if len(runs) != 1 {
		t.Fatalf("%d provision pods ran, want 1", len(runs))
	}
	check(runs[0])
	var rec flex.PodConfig
	if err := json.Unmarshal([]byte(pv.Annotations[flex.AnnPod]), &rec); err != nil || rec.Template == nil || rec.Template.PriorityClassName != pc.Name {
		t.Errorf("annotation %s does not record the template: %q (%v)", flex.AnnPod, pv.Annotations[flex.AnnPod], err)
	}

	// The ConfigMap changes; the delete pod runs as provisioning was validated.
	cm, err := client(t).CoreV1().ConfigMaps(e.work).Get(ctx, "tpl", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[flex.ConfigPodTemplate] = "spec: {nodeSelector: {tier: other}}"
	if _, err := client(t).CoreV1().ConfigMaps(e.work).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	runs = e.runs(flex.ActionDelete)
	if len(runs) != 1 {
		t.Fatalf("%d delete pods ran, want 1", len(runs))
	}
	check(runs[0])
	expectNoPods(t, ctx, e.work)

	// A forbidden field: no pod, a Warning event that says which.
	e.configMap(t, ctx, e.work, "bad", nil, map[string]string{
		flex.ConfigImage: imageHostdir, flex.ConfigPodTemplate: "spec:\n  hostNetwork: true\n",
	})
	badClass := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "bad"), e.name, map[string]string{flex.ParamProvisionerConfig: "bad"}))
	bad := createPVC(t, ctx, e.ns, "bad", badClass.Name, "1Gi")
	msg := waitForEventContaining(t, ctx, bad, "ProvisioningFailed", "provisioner ConfigMap "+e.work+`/bad is invalid`,
		`key "pod-template": field spec.hostNetwork: not allowed`)
	t.Logf("event: %s", msg)
	if pods, err := client(t).CoreV1().Pods(e.work).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods for the refused template: %v, %v", pods, err)
	}
}
