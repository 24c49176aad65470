// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package podrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const ns = "work"

// pod is an operation pod as a provisioner builds it.
func pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "op-pvc-1", Namespace: ns, Labels: map[string]string{"app": "op", "pv": "pvc-1"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:        ptr.To[int64](60),
			AutomountServiceAccountToken: ptr.To(false),
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/data"},
			}}},
			Containers: []corev1.Container{{
				Name: "work", Image: "img:v1", Args: []string{"create", "--rel=a"},
				Env:                    []corev1.EnvVar{{Name: "ACTION", Value: "create"}},
				VolumeMounts:           []corev1.VolumeMount{{Name: "root", MountPath: "/data"}},
				TerminationMessagePath: "/dev/termination-log",
				SecurityContext:        &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")},
				},
			}},
		},
	}
}

func terminated(phase corev1.PodPhase, msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "work", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}},
	}}}
}

// newClient is a fake clientset that gives created pods a UID, as the API
// server does.
func newClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateActionImpl).Object.(*corev1.Pod).UID = "created"
		return false, nil, nil
	})
	return c
}

func TestStart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newClient()
	r := Runner{Client: c}
	got, err := r.Start(ctx, pod(), SameIntent)
	if err != nil || got.UID != "created" {
		t.Fatalf("creating: %v, %v", got, err)
	}

	// An earlier attempt's pod is taken, never duplicated.
	earlier := pod()
	earlier.UID = "earlier"
	c = newClient(earlier)
	got, err = Runner{Client: c}.Start(ctx, pod(), SameIntent)
	if err != nil || got.UID != "earlier" {
		t.Fatalf("taking the earlier attempt's pod: %v, %v", got, err)
	}

	// A planted pod is refused and left alone.
	planted := pod()
	planted.Spec.Containers[0].Image = "evil"
	c = newClient(planted)
	if _, err := (Runner{Client: c}).Start(ctx, pod(), SameIntent); !errors.Is(err, ErrForeignPod) || !strings.Contains(err.Error(), "work/op-pvc-1") {
		t.Fatalf("planted pod: %v", err)
	}
	if _, err := c.CoreV1().Pods(ns).Get(ctx, planted.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the planted pod was deleted: %v", err)
	}

	// Other errors are the API server's.
	c = newClient()
	c.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "op-pvc-1", errors.New("quota"))
	})
	if _, err := (Runner{Client: c}).Start(ctx, pod(), SameIntent); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden: %v", err)
	}
}

func TestWait(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	bound := time.Now().Add(time.Minute)

	// Already ended when the watch starts.
	done := pod()
	done.UID = "u"
	done.Status = terminated(corev1.PodSucceeded, "ok")
	got, err := Runner{Client: newClient(done)}.Wait(ctx, done, bound)
	if err != nil || Terminated(got, "work").Message != "ok" {
		t.Fatalf("ended pod: %v, %v", got, err)
	}

	// Ends while watched.
	running := pod()
	running.UID = "u"
	c := newClient(running)
	go func() {
		p := running.DeepCopy()
		p.Status = terminated(corev1.PodFailed, "boom")
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Errorf("updating status: %v", err)
		}
	}()
	got, err = Runner{Client: c}.Wait(ctx, running, bound)
	if err != nil || got.Status.Phase != corev1.PodFailed {
		t.Fatalf("pod that fails: %v, %v", got, err)
	}

	// Gone, or replaced by another of its name.
	if _, err := (Runner{Client: newClient()}).Wait(ctx, running, bound); !errors.Is(err, ErrPodGone) {
		t.Errorf("missing pod: %v", err)
	}
	other := running.DeepCopy()
	other.UID = "other"
	if _, err := (Runner{Client: newClient(other)}).Wait(ctx, running, bound); !errors.Is(err, ErrPodGone) {
		t.Errorf("replaced pod: %v", err)
	}

	// Still running at the bound.
	if _, err := (Runner{Client: newClient(running)}).Wait(ctx, running, time.Now().Add(50*time.Millisecond)); err == nil || errors.Is(err, ErrPodGone) {
		t.Errorf("bound passed: %v", err)
	}
}

func TestDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := pod()
	p.UID = "u"
	c := newClient(p)
	var grace *int64
	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		grace = a.(k8stesting.DeleteActionImpl).DeleteOptions.GracePeriodSeconds
		return false, nil, nil
	})
	ended, cancel := context.WithCancel(ctx)
	cancel()
	Runner{Client: c, DeleteGracePeriod: ptr.To[int64](0)}.Delete(ended, p)
	if _, err := c.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod not deleted after its context ended: %v", err)
	}
	if grace == nil || *grace != 0 {
		t.Errorf("grace period %v, want 0", grace)
	}
	// Only that very pod.
	other := pod()
	other.UID = "other"
	c = fake.NewClientset(other)
	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if uid := a.(k8stesting.DeleteActionImpl).DeleteOptions.Preconditions.UID; uid == nil || *uid != other.UID {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), other.Name, errors.New("UID precondition failed"))
		}
		return false, nil, nil
	})
	Runner{Client: c}.Delete(ctx, p)
	if _, err := c.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("another pod of the name was deleted: %v", err)
	}
}

// What the API server and admission add is allowed; anything else a
// planter changes is not. (TestPodAdoptedAfterReadBack in
// test/integration/flex checks the allowances against a real API server.)
func TestSameIntent(t *testing.T) {
	token := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x2k9q", VolumeSource: corev1.VolumeSource{Projected: tokenVolumeSource()}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x2k9q", ReadOnly: true, MountPath: tokenMountPath})
	}
	for name, admit := range map[string]func(*corev1.Pod){
		"defaults": func(p *corev1.Pod) {
			s := &p.Spec
			s.DNSPolicy, s.SchedulerName, s.SecurityContext = corev1.DNSClusterFirst, "default-scheduler", &corev1.PodSecurityContext{}
			s.TerminationGracePeriodSeconds, s.EnableServiceLinks = ptr.To[int64](30), ptr.To(true)
			s.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
			s.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
			s.Volumes[0].HostPath.Type = ptr.To(corev1.HostPathUnset)
		},
		"default tolerations": func(p *corev1.Pod) {
			for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
				p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)})
			}
		},
		"priority": func(p *corev1.Pod) {
			p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.PreemptionPolicy = "low", ptr.To[int32](10), ptr.To(corev1.PreemptLowerPriority)
		},
		"pull secrets of the account": func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "reg"}} },
		"LimitRange": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		},
		"other labels too":      func(p *corev1.Pod) { p.Labels["extra"] = "x" },
		"other annotations too": func(p *corev1.Pod) { p.Annotations = map[string]string{"extra": "x"} },
		"scheduled":             func(p *corev1.Pod) { p.Spec.NodeName = "n1" },
		"default account":       func(p *corev1.Pod) { p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "default", "default" },
	} {
		p := pod()
		admit(p)
		if d := Mismatch(p, pod()); d != "" {
			t.Errorf("%s: refused (%s)", name, d)
		}
	}
	mounting := pod()
	mounting.Spec.AutomountServiceAccountToken = ptr.To(true)
	admitted := mounting.DeepCopy()
	token(admitted)
	if d := Mismatch(admitted, mounting); d != "" {
		t.Errorf("the token volume of a pod that mounts a token: refused (%s)", d)
	}
	limited := pod()
	limited.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	stored := limited.DeepCopy()
	stored.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if d := Mismatch(stored, limited); d != "" {
		t.Errorf("requests defaulted from limits: refused (%s)", d)
	}
	for image, policy := range map[string]corev1.PullPolicy{
		"img": corev1.PullAlways, "img:latest": corev1.PullAlways, "reg:5000/img": corev1.PullAlways,
		"reg:5000/img:v1": corev1.PullIfNotPresent, "img@sha256:0a1b": corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != policy {
			t.Errorf("default pull policy of %s = %s, want %s", image, got, policy)
		}
	}

	owned := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "PersistentVolume", Name: "pvc-1", UID: "u1"}}
	}
	exec := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo planted >/dev/termination-log"}}}}
	for _, tc := range []struct {
		name, field string
		plant       func(*corev1.Pod)
	}{
		// The fields issue 25 names.
		{"a postStart hook", "spec.containers[0].lifecycle", func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: exec.Exec}}
		}},
		{"an exec liveness probe", "spec.containers[0].livenessProbe", func(p *corev1.Pod) { p.Spec.Containers[0].LivenessProbe = exec }},
		{"an exec readiness probe", "spec.containers[0].readinessProbe", func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = exec }},
		{"an exec startup probe", "spec.containers[0].startupProbe", func(p *corev1.Pod) { p.Spec.Containers[0].StartupProbe = exec }},
		{"hostAliases", "spec.hostAliases", func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "192.0.2.1", Hostnames: []string{"storage.example.com"}}}
		}},
		{"its own DNS policy", "spec.dnsPolicy", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }},
		{"its own DNS config", "spec.dnsConfig", func(p *corev1.Pod) { p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.53"}} }},
		{"a runtimeClassName", "spec.runtimeClassName", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("planted") }},
		{"shareProcessNamespace", "spec.shareProcessNamespace", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }},
		// And the rest of the pod.
		{"other labels", "label app", func(p *corev1.Pod) { p.Labels = nil }},
		{"other owners", "metadata.ownerReferences", owned},
		{"other image", "spec.containers[0].image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil" }},
		{"a command", "spec.containers[0].command", func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sh", "-c", "echo planted"} }},
		{"other args", "spec.containers[0].args[1]", func(p *corev1.Pod) { p.Spec.Containers[0].Args[1] = "--rel=b" }},
		{"other env", "spec.containers[0].env[0].value", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "delete" }},
		{"envFrom", "spec.containers[0].envFrom", func(p *corev1.Pod) { p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "X"}} }},
		{"workingDir", "spec.containers[0].workingDir", func(p *corev1.Pod) { p.Spec.Containers[0].WorkingDir = "/tmp" }},
		{"other volume", "spec.volumes[0].hostPath.path", func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/" }},
		{"other mount", "spec.containers[0].volumeMounts[0].mountPath", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "/x" }},
		{"a device", "spec.containers[0].volumeDevices", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "root", DevicePath: "/dev/x"}}
		}},
		{"other securityContext", "spec.containers[0].securityContext", func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }},
		{"pod securityContext", "spec.securityContext.runAsUser", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		}},
		{"second container", "spec.containers", func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) }},
		{"init container", "spec.initContainers", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "x", Image: "evil"}} }},
		{"ephemeral container", "spec.ephemeralContainers", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "x", Image: "evil"}}}
		}},
		{"host network", "spec.hostNetwork", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{"host users", "spec.hostUsers", func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) }},
		{"restarts", "spec.restartPolicy", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }},
		{"other deadline", "spec.activeDeadlineSeconds", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }},
		{"a token", "spec.automountServiceAccountToken", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }},
		{"a token volume", "spec.volumes", token},
		{"another projection as the token volume", "spec.volumes", func(p *corev1.Pod) {
			p.Spec.AutomountServiceAccountToken = ptr.To(true)
			token(p)
			p.Spec.Volumes[1].Projected.Sources[1].ConfigMap.Name = "other-tenant"
		}},
		{"no toleration", "spec.tolerations", func(p *corev1.Pod) { p.Spec.Tolerations = nil }},
		{"another toleration", "spec.tolerations", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists})
		}},
		{"affinity", "spec.affinity", func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{} }},
		{"a node selector", "spec.nodeSelector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }},
		{"another scheduler", "spec.schedulerName", func(p *corev1.Pod) { p.Spec.SchedulerName = "planted" }},
		{"other termination log", "spec.containers[0].terminationMessagePath", func(p *corev1.Pod) { p.Spec.Containers[0].TerminationMessagePath = "/tmp/x" }},
		{"fewer resources", "spec.containers[0].resources.requests", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = nil }},
		{"other account", "spec.serviceAccountName", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "admin" }},
	} {
		p := pod()
		tc.plant(p)
		if d := Mismatch(p, pod()); d != tc.field {
			t.Errorf("%s: Mismatch = %q, want %q", tc.name, d, tc.field)
		}
		if SameIntent(p, pod()) {
			t.Errorf("%s: taken", tc.name)
		}
	}
	// Owners and annotations are part of the pod too.
	want := pod()
	owned(want)
	want.Annotations = map[string]string{"sig": "abc"}
	if d := Mismatch(pod(), want); d != "annotation sig" {
		t.Errorf("a pod without want's annotation: Mismatch = %q", d)
	}
	p := want.DeepCopy()
	p.OwnerReferences = nil
	if d := Mismatch(p, want); d != "metadata.ownerReferences" {
		t.Errorf("a pod without want's owner: Mismatch = %q", d)
	}
	if d := Mismatch(want.DeepCopy(), want); d != "" {
		t.Errorf("want itself: Mismatch = %q", d)
	}
}

func TestNames(t *testing.T) {
	if n := ShortName("op-pvc-0f4c7a62-4e3c-4b5e-9a3e-2f6d1c7b8a90"); n != "op-pvc-0f4c7a62-4e3c-4b5e-9a3e-2f6d1c7b8a90" {
		t.Errorf("short name changed: %s", n)
	}
	long := strings.Repeat("a", 80)
	a, b := ShortName(long+"1"), ShortName(long+"2")
	if len(a) > maxNameLength || a == b || a != ShortName(long+"1") {
		t.Errorf("capped names %q %q", a, b)
	}
	if ShortName(strings.Repeat("a", 50) + "-.-" + strings.Repeat("b", 20))[49:51] != "a-" {
		t.Errorf("a cut name ends in - or . before its hash")
	}
	if v := LabelValue(long); len(v) > maxNameLength {
		t.Errorf("label value %q", v)
	}
	if v := LabelValue("pvc-1"); v != "pvc-1" {
		t.Errorf("label value %q", v)
	}
}

func TestWhyNotStarted(t *testing.T) {
	waiting := func(node string, phase corev1.PodPhase) *corev1.Pod {
		p := pod()
		p.Spec.NodeName = node
		p.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "work", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}},
		}}}
		return p
	}
	unschedulable := pod()
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}
	selector := pod()
	selector.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	unreported := pod()
	unreported.Spec.NodeName = "ghost"
	started := waiting("n1", corev1.PodPending)
	started.Status.ContainerStatuses[0].State = corev1.ContainerState{}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{unschedulable, "not scheduled: Unschedulable 0/3 nodes are available"},
		{selector, "not scheduled to any node (node-selector disk=ssd)"},
		{waiting("n1", corev1.PodPending), "on node n1, container is waiting: ErrImagePull not found"},
		{unreported, "no kubelet has reported on it: is node ghost up?"},
		{started, "on node n1, container has not started"},
	} {
		if got := WhyNotStarted(tc.pod); got != tc.want {
			t.Errorf("WhyNotStarted = %q, want %q", got, tc.want)
		}
	}
}

func TestStates(t *testing.T) {
	pending := pod()
	if !NeverStarted(pending) || !NeverRan(pending) || Terminal(pending) || Terminated(pending, "work") != nil {
		t.Error("a new pod")
	}
	failed := pod()
	failed.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}
	if !NeverStarted(failed) || NeverRan(failed) || !Terminal(failed) {
		t.Error("a pod failed before it started")
	}
	restarted := pod()
	restarted.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "work", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}},
	}}}
	if NeverStarted(restarted) || NeverRan(restarted) {
		t.Error("a pod that ran once")
	}
	done := pod()
	done.Status = terminated(corev1.PodSucceeded, "ok")
	if NeverStarted(done) || !Terminal(done) || Terminated(done, "work").Message != "ok" || Terminated(done, "other") != nil {
		t.Error("a pod that succeeded")
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("é", MaxMessageBytes) // 2 bytes each
	got := Truncate(s)
	if !strings.HasSuffix(got, "...(truncated)") || len(got) > MaxMessageBytes+len("...(truncated)") || !strings.HasPrefix(got, "éé") {
		t.Errorf("Truncate gave %d bytes: %q...", len(got), got[:10])
	}
	if strings.ContainsRune(got, '\uFFFD') {
		t.Error("cut inside a rune")
	}
	if Truncate(" short \n") != "short" {
		t.Error("short text changed")
	}
}
