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

// What admission adds is allowed; anything else a planter changes is not.
func TestSameIntent(t *testing.T) {
	for name, admit := range map[string]func(*corev1.Pod){
		"defaults": func(p *corev1.Pod) {
			p.Spec.DNSPolicy, p.Spec.SchedulerName = corev1.DNSClusterFirst, "default-scheduler"
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		},
		"default tolerations": func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists})
		},
		"default priority class":      func(p *corev1.Pod) { p.Spec.PriorityClassName = "low" },
		"pull secrets of the account": func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "reg"}} },
		"LimitRange": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		},
		"other labels too": func(p *corev1.Pod) { p.Labels["extra"] = "x" },
		"scheduled":        func(p *corev1.Pod) { p.Spec.NodeName = "n1" },
		"default account":  func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" },
	} {
		p := pod()
		admit(p)
		if !SameIntent(p, pod()) {
			t.Errorf("%s: refused", name)
		}
	}
	token := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
	mounting := pod()
	mounting.Spec.AutomountServiceAccountToken = ptr.To(true)
	admitted := mounting.DeepCopy()
	token(admitted)
	if !SameIntent(admitted, mounting) {
		t.Error("the token volume of a pod that mounts a token: refused")
	}

	for name, plant := range map[string]func(*corev1.Pod){
		"other labels": func(p *corev1.Pod) { p.Labels = nil },
		"other image":  func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil" },
		"a command":    func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sh", "-c", "echo planted"} },
		"other args":   func(p *corev1.Pod) { p.Spec.Containers[0].Args[1] = "--rel=b" },
		"other env":    func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "delete" },
		"envFrom":      func(p *corev1.Pod) { p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "X"}} },
		"workingDir":   func(p *corev1.Pod) { p.Spec.Containers[0].WorkingDir = "/tmp" },
		"other volume": func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/" },
		"other mount":  func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "/x" },
		"a device": func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "root", DevicePath: "/dev/x"}}
		},
		"other securityContext": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil },
		"pod securityContext":   func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)} },
		"second container":      func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) },
		"init container":        func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "x", Image: "evil"}} },
		"host network":          func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"host users":            func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) },
		"restarts":              func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		"other deadline":        func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil },
		"a token":               func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil },
		"a token volume":        token,
		"no toleration":         func(p *corev1.Pod) { p.Spec.Tolerations = nil },
		"affinity":              func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{} },
		"other termination log": func(p *corev1.Pod) { p.Spec.Containers[0].TerminationMessagePath = "/tmp/x" },
		"fewer resources":       func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = nil },
		"other account":         func(p *corev1.Pod) { p.Spec.ServiceAccountName = "admin" },
	} {
		p := pod()
		plant(p)
		if SameIntent(p, pod()) {
			t.Errorf("%s: taken", name)
		}
	}
}

func TestNames(t *testing.T) {
	if n := ShortName("op-pvc-0f4c7a62-4e3c-4b5e-9a3e-2f6d1c7b8a90"); n != "op-pvc-0f4c7a62-4e3c-4b5e-9a3e-2f6d1c7b8a90" {
		t.Errorf("short name changed: %s", n)
	}
	long := strings.Repeat("a", 80)
	a, b := ShortName(long+"1"), ShortName(long+"2")
	if len(a) > MaxNameLength || a == b || a != ShortName(long+"1") {
		t.Errorf("capped names %q %q", a, b)
	}
	if ShortName(strings.Repeat("a", 50) + "-.-" + strings.Repeat("b", 20))[49:51] != "a-" {
		t.Errorf("a cut name ends in - or . before its hash")
	}
	if v := LabelValue(long); len(v) > MaxNameLength {
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
