// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// Pod Security Admission levels, strictest last.
var psaLevels = []string{"privileged", "baseline", "restricted"}

// psaLabels are the labels every Namespace a manifest creates must set.
var psaLabels = []string{"pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/audit", "pod-security.kubernetes.io/warn"}

// laxNamespaces may enforce less than restricted, with the reason (each
// namespace.yaml says it too). Every other namespace enforces restricted.
var laxNamespaces = map[string]struct{ level, why string }{
	"kubeprov-hostpath": {"privileged", "the provisioner mounts a hostPath volume"},
	"kubeprov-nfs":      {"privileged", "server mode: Ganesha adds DAC_READ_SEARCH (open_by_handle_at); subdir mode alone is baseline (nfs volume, root)"},
	"flex-hostdir":      {"privileged", "the example driver's pods mount the share (hostPath) as root"},
}

// rootWorkloads' containers may run as root, with these capabilities added,
// for the reason in their manifests. Every other container runs as non-root
// and adds none.
var rootWorkloads = map[string][]string{
	"hostpath-provisioner":   {"DAC_OVERRIDE", "FOWNER"},
	"nfs-provisioner":        {"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "SETUID", "SETGID", "NET_BIND_SERVICE", "SETPCAP"},
	"nfs-subdir-provisioner": {"CHOWN", "FOWNER", "DAC_OVERRIDE", "FSETID"},
}

// checkNamespaces: every Namespace among objs sets the three Pod Security
// labels, enforces restricted unless laxNamespaces says otherwise, and
// audits and warns at least as strictly as it enforces.
func checkNamespaces(objs []*unstructured.Unstructured) []string {
	var problems []string
	for _, obj := range objs {
		if obj.GetKind() != "Namespace" {
			continue
		}
		name, labels := obj.GetName(), obj.GetLabels()
		for _, l := range psaLabels {
			if !slices.Contains(psaLevels, labels[l]) {
				problems = append(problems, fmt.Sprintf("Namespace %s: label %s is %q, want one of %v", name, l, labels[l], psaLevels))
			}
		}
		enforce := labels[psaLabels[0]]
		allowed := "restricted"
		if lax, ok := laxNamespaces[name]; ok {
			allowed = lax.level
		}
		if strictness(enforce) < strictness(allowed) {
			problems = append(problems, fmt.Sprintf("Namespace %s enforces %q, want %q (the strictest level its pods allow)", name, enforce, allowed))
		}
		for _, l := range psaLabels[1:] {
			if strictness(labels[l]) < strictness(enforce) {
				problems = append(problems, fmt.Sprintf("Namespace %s: %s is %q, less strict than enforce %q", name, l, labels[l], enforce))
			}
		}
	}
	return problems
}

func strictness(level string) int { return slices.Index(psaLevels, level) }

// podsOf are the workloads among objs and the bare Pods (examples), each as
// a Workload.
func podsOf(t *testing.T, objs []*unstructured.Unstructured) []manifests.Workload {
	t.Helper()
	workloads, err := manifests.Workloads(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() != "Pod" {
			continue
		}
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pod); err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, manifests.Workload{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name,
			Pod: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}})
	}
	return workloads
}

// checkContainers: every container of w is hardened: no privilege
// escalation, all capabilities dropped and only rootContainers' added back,
// RuntimeDefault seccomp, a read-only root filesystem, and non-root unless
// rootWorkloads lists it.
func checkContainers(w manifests.Workload) []string {
	var problems []string
	pod := w.Pod.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	for _, c := range slices.Concat(w.Pod.Spec.InitContainers, w.Pod.Spec.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		where := w.String() + " container " + c.Name
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			problems = append(problems, fmt.Sprintf("%s: set securityContext.allowPrivilegeEscalation: false", where))
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			problems = append(problems, fmt.Sprintf("%s: set securityContext.readOnlyRootFilesystem: true (and an emptyDir for any path it writes)", where))
		}
		var drop, add []corev1.Capability
		if sc.Capabilities != nil {
			drop, add = sc.Capabilities.Drop, sc.Capabilities.Add
		}
		if !slices.Contains(drop, "ALL") {
			problems = append(problems, fmt.Sprintf("%s: set securityContext.capabilities.drop: [ALL] and add back only what it needs", where))
		}
		allowedCaps, root := rootWorkloads[w.Name]
		for _, capability := range add {
			if !slices.Contains(allowedCaps, string(capability)) {
				problems = append(problems, fmt.Sprintf("%s adds capability %s: if it needs it, say why in the manifest and in rootWorkloads", where, capability))
			}
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = pod.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			problems = append(problems, fmt.Sprintf("%s: set seccompProfile type RuntimeDefault (pod or container securityContext)", where))
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = pod.RunAsNonRoot
		}
		if !root && (nonRoot == nil || !*nonRoot) {
			problems = append(problems, fmt.Sprintf("%s: set runAsNonRoot: true (pod or container securityContext)", where))
		}
	}
	return problems
}

// checkToken: only the provisioner's container may hold the ServiceAccount's
// token; a pod with any other container mounts none by default and gives
// the provisioner a projected one.
func checkToken(w manifests.Workload, provisioner corev1.Container) []string {
	var problems []string
	spec := w.Pod.Spec
	if len(spec.Containers)+len(spec.InitContainers) == 1 {
		return nil
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		problems = append(problems, fmt.Sprintf("%s: every container gets the ServiceAccount token; set automountServiceAccountToken: false and mount a projected token into %s only", w, provisioner.Name))
	}
	tokenVolumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
			tokenVolumes[v.Name] = true
		}
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if c.Name == provisioner.Name {
			continue
		}
		for _, m := range c.VolumeMounts {
			if tokenVolumes[m.Name] {
				problems = append(problems, fmt.Sprintf("%s: container %s mounts the ServiceAccount token (volume %s); only %s needs it", w, c.Name, m.Name, provisioner.Name))
			}
		}
	}
	return problems
}

// dryRunPod creates w's pod with a server-side dry-run in namespace, so that
// Pod Security Admission judges it at the level the namespace enforces (it
// judges Pods, not workloads).
func dryRunPod(ctx context.Context, t *testing.T, w manifests.Workload, namespace string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(w.Kind) + "-" + w.Name, Namespace: namespace, Labels: w.Pod.Labels},
		Spec:       *w.Pod.Spec.DeepCopy(),
	}
	// A StatefulSet's volumeClaimTemplates become claim volumes of its pods.
	defined := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		defined[v.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if !defined[m.Name] {
				defined[m.Name] = true
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: m.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Name + "-" + w.Name + "-0"},
				}})
			}
		}
	}
	_, err := cp.Client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Errorf("the pod of %s, created in namespace %s (server-side dry-run, Pod Security enforced): %v", w, namespace, err)
	}
}

// restrictedNamespace creates a namespace that enforces restricted: where
// users' pods, such as the examples, run.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := cp.CreateTestNamespace(t, "restricted")
	patch := `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`
	if _, err := cp.Client.CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// checkPodSecurity: the namespaces and every pod of objs are hardened (see
// checkNamespaces, checkContainers, checkToken), and Pod Security Admission
// lets each pod run where it goes: a workload's in its namespace, an
// example in a namespace that enforces restricted.
func checkPodSecurity(ctx context.Context, t *testing.T, root, provisioner, restricted string, objs []*unstructured.Unstructured) {
	t.Helper()
	problems := checkNamespaces(objs)
	binaries, err := binariesOf(root, provisioner)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range podsOf(t, objs) {
		problems = append(problems, checkContainers(w)...)
		if c, ok := provisionerContainer(w, binaries); ok {
			problems = append(problems, checkToken(w, c)...)
		}
		namespace := w.Namespace
		if w.Kind == "Pod" {
			namespace = restricted
		}
		dryRunPod(ctx, t, w, namespace)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestPodSecurityCheckFindsProblems proves the Pod Security checks are not
// vacuous: a namespace without labels, a container with no securityContext,
// one that adds a capability, and a sidecar that shares the provisioner's
// token each get reported.
func TestPodSecurityCheckFindsProblems(t *testing.T) {
	ns := &unstructured.Unstructured{}
	ns.SetKind("Namespace")
	ns.SetName("unlabelled")
	lax := &unstructured.Unstructured{}
	lax.SetKind("Namespace")
	lax.SetName("lax")
	lax.SetLabels(map[string]string{psaLabels[0]: "baseline", psaLabels[1]: "privileged", psaLabels[2]: "restricted"})
	provisioner := corev1.Container{Name: "provisioner"}
	w := manifests.Workload{Kind: "Deployment", Namespace: "lax", Name: "test", Pod: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{provisioner, {Name: "sidecar", SecurityContext: &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SYS_ADMIN"}},
		}}},
	}}}
	problems := slices.Concat(checkNamespaces([]*unstructured.Unstructured{ns, lax}), checkContainers(w), checkToken(w, provisioner))
	report := expectReported(t, problems,
		"Namespace unlabelled: label pod-security.kubernetes.io/enforce is \"\"",
		`Namespace lax enforces "baseline", want "restricted"`,
		`Namespace lax: pod-security.kubernetes.io/audit is "privileged", less strict than enforce "baseline"`,
		"container provisioner: set securityContext.allowPrivilegeEscalation: false",
		"container provisioner: set securityContext.readOnlyRootFilesystem: true",
		"container provisioner: set securityContext.capabilities.drop: [ALL]",
		"container provisioner: set seccompProfile type RuntimeDefault",
		"container provisioner: set runAsNonRoot: true",
		"container sidecar adds capability SYS_ADMIN",
		"every container gets the ServiceAccount token",
	)
	if strings.Contains(report, "container sidecar: set securityContext.capabilities.drop") {
		t.Errorf("a container that drops ALL was reported:\n%s", report)
	}
}
