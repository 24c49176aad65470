// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

// The shapes of kubernetes-csi's own manifests for csi-provisioner, as
// facts read on 2026-11-26: external-provisioner's deploy/kubernetes/
// deployment.yaml and rbac.yaml (commit 0688604f), and the csi-provisioner
// container of csi-driver-host-path's deploy/kubernetes-distributed plugin
// DaemonSet (commit 1f2b2e64). The csi-provisioner container of its
// kubernetes-1.34 StatefulSet adds nothing these two lack (-v=5,
// --csi-address, --feature-gates=Topology=true, privileged; one replica, no
// leader election, no endpoint).
const (
	// upstreamNamespace starts with upstreamNamespacePrefix, so that the
	// suite's audit check covers its ServiceAccount.
	upstreamNamespace = upstreamNamespacePrefix + "csi"
	// upstreamServiceAccount is the account both shapes run as (rbac.yaml).
	upstreamServiceAccount = "csi-provisioner"
	// The drivers the in-repo driver is named as in each shape, so that
	// each shape provisions only its own claims.
	upstreamDeploymentDriver = "deployment.upstream.csi.test"
	upstreamDaemonSetDriver  = "daemonset.upstream.csi.test"
	// upstreamObservation is how long the issue asks the pods to stay Ready
	// with no restart under a provision/delete loop.
	upstreamObservation = 5 * time.Minute
)

// upstreamClusterRules are the rules of rbac.yaml's ClusterRole
// external-provisioner-runner (those not commented out there).
var upstreamClusterRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch", "create", "update", "patch"}},
	{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots"}, Verbs: []string{"get", "list", "watch", "update"}},
	{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotcontents"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csinodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments"}, Verbs: []string{"get", "list", "watch"}},
}

// upstreamNamespaceRules are the rules of rbac.yaml's Role
// external-provisioner-cfg.
var upstreamNamespaceRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "watch", "list", "delete", "update", "create"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csistoragecapacities"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
}

// Upstream's RBAC is kept as it is; what csi/README.md ("RBAC" in the
// comparison with upstream) tells users switching to add goes to a
// ClusterRole and a Role of their own beside it: PV update for the
// finalizer, the VolumeAttributesClass a claim names, and lib/deploy/rbac's
// in-flight journal (ConfigMaps, the journal key Secret).
var (
	kubeprovClusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"update"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattributesclasses"}, Verbs: []string{"get"}},
	}
	kubeprovNamespaceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"kubeprov-journal-key"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}
)

// upstreamDeployment is deployment.yaml's Deployment: three replicas
// electing a leader, the socket address from the environment, the liveness
// probe on /healthz/leader-election of --http-endpoint. The mock driver's
// container is the in-repo driver on the same socket.
func upstreamDeployment(provisionerImage, driverImage string) *appsv1.Deployment {
	const socketDir = "/var/lib/csi/sockets/pluginproxy/"
	const socket = socketDir + "mock.socket"
	labels := map[string]string{"app": "csi-provisioner"}
	provisioner := corev1.Container{
		Name:            "csi-provisioner",
		Image:           provisionerImage,
		Args:            []string{"--csi-address=$(ADDRESS)", "--leader-election", "--http-endpoint=:8080"},
		Env:             []corev1.EnvVar{{Name: "ADDRESS", Value: socket}},
		ImagePullPolicy: corev1.PullIfNotPresent,
		VolumeMounts:    []corev1.VolumeMount{{Name: "socket-dir", MountPath: socketDir}},
		Ports:           []corev1.ContainerPort{{ContainerPort: 8080, Name: "http-endpoint", Protocol: corev1.ProtocolTCP}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz/leader-election", Port: intstr.FromString("http-endpoint"),
			}},
			FailureThreshold: 1, InitialDelaySeconds: 10, TimeoutSeconds: 10, PeriodSeconds: 20,
		},
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "csi-provisioner", Namespace: upstreamNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: upstreamPod(labels, provisioner, inRepoDriver("mock-driver", driverImage, socket, upstreamDeploymentDriver),
				corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		},
	}
}

// upstreamDaemonSet is the distributed DaemonSet's csi-provisioner: one
// per node with --node-deployment, storage capacity tracking with the pod
// as owner, privileged, the socket in a directory of the node. The
// hostpath plugin's container is the in-repo driver on that socket; the
// other containers of that DaemonSet (node-driver-registrar,
// liveness-probe) serve the node plugin, which the in-repo driver has not.
//
// csi-provisioner runs as root, the user of upstream's image (ours runs as
// 65532): the driver, root as the hostpath plugin, makes the socket in a
// directory only root can write, and only root may connect to it.
func upstreamDaemonSet(provisionerImage, driverImage string) *appsv1.DaemonSet {
	const socketDir = "/csi"
	const socket = socketDir + "/csi.sock"
	labels := map[string]string{
		"app.kubernetes.io/instance":  "hostpath.csi.k8s.io",
		"app.kubernetes.io/part-of":   "csi-driver-host-path",
		"app.kubernetes.io/name":      "csi-hostpathplugin",
		"app.kubernetes.io/component": "plugin",
	}
	fromField := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	provisioner := corev1.Container{
		Name:  "csi-provisioner",
		Image: provisionerImage,
		Args: []string{
			"-v=5", "--csi-address=" + socket, "--feature-gates=Topology=true",
			"--enable-capacity", "--capacity-ownerref-level=0", "--node-deployment=true",
			"--strict-topology=true", "--immediate-topology=false", "--worker-threads=5",
		},
		Env: []corev1.EnvVar{
			fromField("NODE_NAME", "spec.nodeName"),
			fromField("NAMESPACE", "metadata.namespace"),
			fromField("POD_NAME", "metadata.name"),
		},
		SecurityContext: privilegedRoot(),
		VolumeMounts:    []corev1.VolumeMount{{Name: "socket-dir", MountPath: socketDir}},
	}
	driver := inRepoDriver("hostpath", driverImage, socket, upstreamDaemonSetDriver)
	driver.SecurityContext = privilegedRoot()
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "csi-hostpathplugin", Namespace: upstreamNamespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: upstreamPod(labels, provisioner, driver, corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/var/lib/kubelet/plugins/csi-hostpath", Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}}),
		},
	}
}

func privilegedRoot() *corev1.SecurityContext {
	return &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0)}
}

// upstreamPod is a pod of upstream's ServiceAccount running csi-provisioner
// and the driver, with the socket directory in socketDir.
func upstreamPod(labels map[string]string, provisioner, driver corev1.Container, socketDir corev1.VolumeSource) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: upstreamServiceAccount,
			Containers:         []corev1.Container{provisioner, driver},
			Volumes:            []corev1.Volume{{Name: "socket-dir", VolumeSource: socketDir}},
		},
	}
}

// inRepoDriver is test/cmd/csidriver serving driver on socket, mounting the
// shape's socket-dir volume at the socket's directory.
func inRepoDriver(name, image, socket, driver string) corev1.Container {
	return corev1.Container{
		Name:         name,
		Image:        image,
		Args:         []string{"--endpoint=unix://" + socket, "--name=" + driver},
		VolumeMounts: []corev1.VolumeMount{{Name: "socket-dir", MountPath: socket[:strings.LastIndex(socket, "/")+1]}},
	}
}

// upstreamObjects are the namespace, rbac.yaml's account and roles in it,
// the additions beside them, and both shapes.
func upstreamObjects(provisionerImage, driverImage string) []runtime.Object {
	account := []rbacv1.Subject{{Kind: "ServiceAccount", Name: upstreamServiceAccount, Namespace: upstreamNamespace}}
	clusterRole := func(name string, rules []rbacv1.PolicyRule) []runtime.Object {
		return []runtime.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: account,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
		}
	}
	role := func(name string, rules []rbacv1.PolicyRule) []runtime.Object {
		meta := metav1.ObjectMeta{Name: name, Namespace: upstreamNamespace}
		return []runtime.Object{
			&rbacv1.Role{ObjectMeta: meta, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: meta, Subjects: account,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}},
		}
	}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upstreamNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: upstreamServiceAccount, Namespace: upstreamNamespace}},
	}
	objs = append(objs, clusterRole("external-provisioner-runner", upstreamClusterRules)...)
	objs = append(objs, role("external-provisioner-cfg", upstreamNamespaceRules)...)
	objs = append(objs, clusterRole("external-provisioner-kubeprov", kubeprovClusterRules)...)
	objs = append(objs, role("external-provisioner-kubeprov", kubeprovNamespaceRules)...)
	return append(objs, upstreamDeployment(provisionerImage, driverImage), upstreamDaemonSet(provisionerImage, driverImage))
}

// TestCSIUpstreamShapes runs csi-provisioner in upstream's own shapes, a
// Deployment and a distributed DaemonSet (arguments, environment, probes,
// ports, RBAC as upstream's manifests have them; only the images and the
// driver container replaced), and csi/deploy beside them, and has each
// provision and delete claims in a loop for upstreamObservation: every pod
// stays Ready with no restart all along, and the API server refuses none of
// upstream's ServiceAccount's requests.
func TestCSIUpstreamShapes(t *testing.T) {
	ctx := framework.TestContext(t, upstreamObservation+10*time.Minute)
	ref, driverRef := pushCSIImages(t, ctx)
	objs, err := toUnstructured(upstreamObjects(ref, driverRef))
	if err != nil {
		t.Fatal(err)
	}
	installObjects(t, "upstream's csi-provisioner manifests", objs)
	install(t, "csi/deploy",
		ImageOverride{"ghcr.io/kubeprov/csi-provisioner", ref},
		ImageOverride{"registry.example.com/example-csi-driver", driverRef})
	for _, err := range []error{
		c.WaitDeploymentAvailable(ctx, upstreamNamespace, "csi-provisioner"),
		c.WaitDaemonSetReady(ctx, upstreamNamespace, "csi-hostpathplugin"),
		c.WaitDeploymentAvailable(ctx, csiNS, csiDeployment),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	ns := c.CreateTestNamespace(t, "claims-upstream")
	wffc := ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	loops := []provisionLoop{
		{name: "upstream Deployment", driver: upstreamDeploymentDriver},
		// The distributed shape's classes wait for the first consumer; the
		// test picks the node, as the scheduler would, alternately.
		{name: "upstream DaemonSet", driver: upstreamDaemonSetDriver, binding: wffc, nodes: nodeNames()},
		{name: "csi/deploy", driver: csiExampleDriver},
	}
	for i := range loops {
		class := framework.NewStorageClass(ns+"-"+fmt.Sprint(i), loops[i].driver, nil)
		if loops[i].binding != nil {
			class.VolumeBindingMode = loops[i].binding
		}
		if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.StorageV1().StorageClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
		})
		loops[i].ns, loops[i].class = ns, class.Name
	}

	start := time.Now()
	observeCtx, stopObserving := context.WithTimeout(ctx, upstreamObservation)
	defer stopObserving()
	var wg sync.WaitGroup
	unsteady := make(chan error, 1)
	wg.Go(func() {
		err := watchPodsSteady(observeCtx, upstreamNamespace, csiNS)
		unsteady <- err
		if err != nil {
			stopObserving() // no need to watch the rest
		}
	})
	rounds := make([]int, len(loops))
	errs := make([]error, len(loops))
	for i := range loops {
		wg.Go(func() { rounds[i], errs[i] = loops[i].run(observeCtx) })
	}
	wg.Wait()
	observed := time.Since(start).Round(time.Second)
	if err := <-unsteady; err != nil {
		t.Error(err)
	}
	for i, l := range loops {
		if errs[i] != nil {
			t.Errorf("%s: %v", l.name, errs[i])
		}
		if rounds[i] == 0 && errs[i] == nil {
			t.Errorf("%s provisioned and deleted no claim in %v", l.name, observed)
		}
		t.Logf("%s: %d claims provisioned and deleted in %v", l.name, rounds[i], observed)
	}
	// The suite checks the audit log again at its end, after the
	// uninstall, so that a graceful stop's requests count too.
	if err := expectNotForbidden(ctx, upstreamNamespace); err != nil {
		t.Error(err)
	}
}

// provisionLoop creates a claim of class, waits until it is bound to a
// volume of driver, deletes it and waits until its PV is gone, again and
// again.
type provisionLoop struct {
	name, driver, ns, class string
	binding                 *storagev1.VolumeBindingMode
	// nodes, for WaitForFirstConsumer, are selected for the claims in turn.
	nodes []string
}

// run loops until ctx ends; it returns how many claims went the whole way
// and the first failure.
func (l provisionLoop) run(ctx context.Context) (int, error) {
	for round := 0; ; round++ {
		if err := l.once(ctx, round); err != nil {
			if ctx.Err() != nil {
				return round, nil // the observation ended mid-claim
			}
			return round, fmt.Errorf("claim %d: %w", round, err)
		}
	}
}

func (l provisionLoop) once(ctx context.Context, round int) error {
	claim := framework.NewPVC(l.ns, fmt.Sprintf("%s-%d", l.class, round), l.class, "1Gi")
	if len(l.nodes) > 0 {
		claim.Annotations = map[string]string{"volume.kubernetes.io/selected-node": l.nodes[round%len(l.nodes)]}
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(l.ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return err
	}
	// A claim left behind by the observation's end goes with the namespace.
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, l.ns, claim.Name)
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != l.driver {
		return fmt.Errorf("PV %s has source %+v, want a CSI volume of %s", pv.Name, pv.Spec.PersistentVolumeSource, l.driver)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(l.ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return framework.WaitForPVDeleted(ctx, c.Client, pv.Name)
}

// watchPodsSteady checks the pods of the namespaces every 2 s until ctx
// ends: each must be Ready with no container restarted, and none may go
// or come (a replaced pod would hide a restart).
func watchPodsSteady(ctx context.Context, namespaces ...string) error {
	first := map[string]bool{}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		seen := map[string]bool{}
		for _, ns := range namespaces {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				// The client's rate limiter refuses a wait that would pass
				// the observation's end before the context is done.
				if deadline, ok := ctx.Deadline(); ctx.Err() != nil || ok && time.Until(deadline) < 5*time.Second {
					return nil
				}
				return err
			}
			for _, p := range pods.Items {
				key := ns + "/" + p.Name
				seen[key] = true
				if err := podSteady(&p); err != nil {
					return fmt.Errorf("pod %s: %w", key, err)
				}
			}
		}
		if len(first) == 0 {
			first = seen
		} else if fmt.Sprint(first) != fmt.Sprint(seen) {
			return fmt.Errorf("the pods changed from %v to %v", keys(first), keys(seen))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// podSteady says why the pod is not Ready with every container started once.
func podSteady(p *corev1.Pod) error {
	var errs []error
	ready := false
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		errs = append(errs, fmt.Errorf("not Ready (phase %s)", p.Status.Phase))
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.RestartCount != 0 {
			errs = append(errs, fmt.Errorf("container %s restarted %d times (last state %+v)", s.Name, s.RestartCount, s.LastTerminationState))
		}
	}
	return errors.Join(errs...)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// nodeNames are the cluster's nodes.
func nodeNames() []string {
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Name
	}
	return names
}

// expectNotForbidden: the API server refused no request of a
// ServiceAccount of ns so far.
func expectNotForbidden(ctx context.Context, ns string) error {
	prefix := "system:serviceaccount:" + ns + ":"
	refused, err := c.Forbidden(ctx, func(user string) bool { return strings.HasPrefix(user, prefix) })
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range refused {
		lines = append(lines, "  "+e.Username()+": "+e.String())
	}
	if len(lines) > 0 {
		return fmt.Errorf("the API server refused %d request(s) of ServiceAccounts of %s:\n%s", len(lines), ns, strings.Join(lines, "\n"))
	}
	return nil
}

// toUnstructured converts typed objects for Apply, with their kinds set.
func toUnstructured(objs []runtime.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		out[i] = &unstructured.Unstructured{Object: m}
		out[i].SetGroupVersionKind(gvks[0])
	}
	return out, nil
}
