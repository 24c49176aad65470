// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/podrun/podruntest"
)

const helperNS = "kubeprov-hostpath"

// newHelperClient is a fake clientset with the Ready nodes worker-1 and
// worker-7 that stamps created pods with a creation time, as the API server
// does.
func newHelperClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(append(objs, readyNode("worker-1"), readyNode("worker-7"))...)
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateActionImpl).Object.(*corev1.Pod).CreationTimestamp = metav1.Now()
		return false, nil, nil
	})
	return c
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// untilEnded calls f, as the controller's retries would, until its answer
// is no longer that the helper pod is still running.
func untilEnded[T any](ctx context.Context, t *testing.T, f func() (T, error)) (T, error) {
	t.Helper()
	var v T
	var err error
	werr := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		v, err = f()
		return !errors.Is(err, ErrInProgress), nil
	})
	if werr != nil {
		t.Fatalf("the helper pod never ended: %v (last: %v)", werr, err)
	}
	return v, err
}

func newHelperDirs(t *testing.T, c kubernetes.Interface, timeout time.Duration) *HelperDirs {
	t.Helper()
	h, err := NewHelperDirs(HelperConfig{Client: c, Namespace: helperNS, Image: "hostpath-provisioner:test", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// parseHelperArgs reads back what HelperRequest.Args wrote, as the helper
// subcommand does.
func parseHelperArgs(t *testing.T, args []string) HelperRequest {
	t.Helper()
	if len(args) < 2 || args[0] != HelperSubcommand {
		t.Fatalf("args %v do not run the helper subcommand", args)
	}
	r := HelperRequest{Action: args[1]}
	for _, a := range args[2:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "--root":
			r.Roots = append(r.Roots, v)
		case "--rel":
			r.Rel = v
		case "--mode":
			m, err := strconv.ParseUint(v, 0, 32)
			if err != nil {
				t.Fatal(err)
			}
			r.Mode = os.FileMode(m)
		case "--size-bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			r.SizeBytes = n
		case "--must-be-empty":
			r.MustBeEmpty = true
		default:
			t.Fatalf("unknown helper argument %q", a)
		}
	}
	return r
}

// runsHelper is a kubelet that carries out the pod's request on this
// filesystem with RunHelper, as the container would.
func runsHelper(t *testing.T) func(*corev1.Pod) corev1.PodStatus {
	return func(pod *corev1.Pod) corev1.PodStatus {
		res := RunHelper(context.Background(), parseHelperArgs(t, pod.Spec.Containers[0].Args))
		b, _ := json.Marshal(res)
		phase, code := corev1.PodSucceeded, int32(0)
		if res.Error != "" {
			phase, code = corev1.PodFailed, 1
		}
		return terminatedHelper(phase, code, string(b))
	}
}

func terminatedHelper(phase corev1.PodPhase, code int32, msg string) corev1.PodStatus {
	// A container that ran, as the kubelet reports it: an id and a start.
	return corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name: HelperContainerName, ContainerID: "containerd://0123", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Message: msg, ContainerID: "containerd://0123", StartedAt: metav1.Now(),
		}},
	}}}
}

// TestHelperPodSpec: pinned to the node, only the configured paths mounted
// (as Directory, at the same path), no service account token, and the
// restricted security context.
func TestHelperPodSpec(t *testing.T) {
	h := newHelperDirs(t, fake.NewClientset(), time.Minute)
	req := HelperRequest{Action: HelperCreate, Roots: []string{"/data/ssd", "/data/hdd"}, Rel: "ns/claim", Mode: 0o777, SizeBytes: 42, MustBeEmpty: true}
	pod := h.Pod(HelperOp{Node: "worker-1", PV: "pvc-1", ClaimNamespace: "tenant", Request: req})

	if pod.Name != "hostpath-create-pvc-1" || pod.Namespace != helperNS || pod.Labels[LabelHelperPV] != "pvc-1" || pod.Labels[LabelHelperClaimNamespace] != "tenant" ||
		pod.Labels[LabelHelperAction] != HelperCreate || pod.Labels[LabelManagedBy] != ManagedBy {
		t.Errorf("pod %s/%s labels %v", pod.Namespace, pod.Name, pod.Labels)
	}
	s := pod.Spec
	if s.NodeName != "worker-1" || s.RestartPolicy != corev1.RestartPolicyNever || *s.ActiveDeadlineSeconds != 60 ||
		*s.AutomountServiceAccountToken || s.HostNetwork || s.HostPID || s.HostIPC || len(s.InitContainers) != 0 {
		t.Errorf("pod spec %+v", s)
	}
	if len(s.Volumes) != 2 || len(s.Containers) != 1 {
		t.Fatalf("volumes %v, containers %d", s.Volumes, len(s.Containers))
	}
	c := s.Containers[0]
	for i, root := range req.Roots {
		v := s.Volumes[i]
		if v.HostPath == nil || v.HostPath.Path != root || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("volume %d = %+v, want hostPath %s of type DirectoryOrCreate", i, v, root)
		}
		if m := c.VolumeMounts[i]; m.Name != v.Name || m.MountPath != root || m.SubPath != "" {
			t.Errorf("mount %d = %+v", i, m)
		}
	}
	if len(c.VolumeMounts) != 2 {
		t.Errorf("mounts %v: only the configured paths", c.VolumeMounts)
	}
	want := []string{"helper", "create", "--root=/data/ssd", "--root=/data/hdd", "--rel=ns/claim", "--mode=0777", "--size-bytes=42", "--must-be-empty"}
	if strings.Join(c.Args, " ") != strings.Join(want, " ") || len(c.Command) != 0 || c.Image != "hostpath-provisioner:test" {
		t.Errorf("container runs %v %v from %s, want the image's entrypoint with %v", c.Command, c.Args, c.Image, want)
	}
	if c.TerminationMessagePath != HelperTerminationLog || c.Env[0].Value != HelperTerminationLog {
		t.Errorf("termination message at %s, env %v", c.TerminationMessagePath, c.Env)
	}
	sc := c.SecurityContext
	if *sc.Privileged || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		strings.Join(capNames(sc.Capabilities.Drop), ",") != "ALL" ||
		strings.Join(capNames(sc.Capabilities.Add), ",") != "DAC_OVERRIDE,FOWNER" || *sc.RunAsUser != 0 {
		t.Errorf("securityContext %+v", sc)
	}

	rm := h.Pod(HelperOp{Node: "worker-1", PV: "pvc-1", Request: HelperRequest{Action: HelperRemove, Roots: []string{"/data/ssd"}, Rel: "pvc-1"},
		Owner: &metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolume", Name: "pvc-1", UID: "u"}})
	if len(rm.Spec.Volumes) != 1 || rm.Spec.Volumes[0].HostPath.Path != "/data/ssd" || rm.OwnerReferences[0].UID != "u" {
		t.Errorf("remove pod volumes %v owners %v", rm.Spec.Volumes, rm.OwnerReferences)
	}
	long := strings.Repeat("x", 200)
	if n := HelperPodName(HelperCreate, long, "", ""); len(n) > 63 || n == HelperPodName(HelperCreate, long+"y", "", "") {
		t.Errorf("pod name %q: not capped or not distinct", n)
	}
}

func capNames(cs []corev1.Capability) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}

// TestHelperPathChecks: the helper re-checks its request inside the pod.
func TestHelperPathChecks(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  HelperRequest
		want string
	}{
		{"dotdot", HelperRequest{Action: HelperCreate, Roots: []string{root}, Rel: "../escape"}, `".." component`},
		{"inner dotdot", HelperRequest{Action: HelperRemove, Roots: []string{root}, Rel: "a/../../x"}, `".." component`},
		{"absolute rel", HelperRequest{Action: HelperRemove, Roots: []string{root}, Rel: "/etc"}, "is absolute"},
		{"empty rel", HelperRequest{Action: HelperRemove, Roots: []string{root}, Rel: ""}, "empty"},
		{"relative root", HelperRequest{Action: HelperCreate, Roots: []string{"data"}, Rel: "v"}, "clean absolute path"},
		{"unclean root", HelperRequest{Action: HelperCreate, Roots: []string{root + "/../x"}, Rel: "v"}, "clean absolute path"},
		{"slash root", HelperRequest{Action: HelperRemove, Roots: []string{"/"}, Rel: "etc"}, "other than /"},
		{"two roots to remove", HelperRequest{Action: HelperRemove, Roots: []string{root, outside}, Rel: "v"}, "exactly one --root"},
		{"unknown action", HelperRequest{Action: "chmod", Roots: []string{root}, Rel: "v"}, "must be create, remove or check"},
		{"mode bits", HelperRequest{Action: HelperCreate, Roots: []string{root}, Rel: "v", Mode: os.ModeSetuid | 0o777}, "bits other than permissions"},
		{"symlink escape", HelperRequest{Action: HelperCreate, Roots: []string{root}, Rel: "link/v", Mode: 0o777}, "path goes through a symbolic link: link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := RunHelper(t.Context(), tc.req)
			if !strings.Contains(res.Error, tc.want) {
				t.Errorf("error %q, want %q", res.Error, tc.want)
			}
		})
	}
	// Removing through the link removes nothing outside the root.
	if res := RunHelper(t.Context(), HelperRequest{Action: HelperRemove, Roots: []string{root}, Rel: "link/keep"}); res.Error == "" {
		t.Error("removing link/keep succeeded")
	}
	if res := RunHelper(t.Context(), HelperRequest{Action: HelperRemove, Roots: []string{root}, Rel: "link"}); res.Error != "" {
		t.Errorf("removing the link: %s", res.Error)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("the link's target lost its file: %v", err)
	}
	if entries(t, outside) == nil {
		t.Error("outside is empty")
	}
	// The good case: a directory with its mode, whatever the umask.
	withUmask(t)
	res := RunHelper(t.Context(), HelperRequest{Action: HelperCreate, Roots: []string{root}, Rel: "ns/v", Mode: 0o777})
	if res.Error != "" || res.Root != root {
		t.Fatalf("result %+v", res)
	}
	if fi, err := os.Stat(filepath.Join(root, "ns/v")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("directory %v, %v", fi, err)
	}
}

func helperProvisioner(t *testing.T, h *HelperDirs) (*Provisioner, string) {
	return newProvisioner(t, func(c *Config) { c.Dirs = h; c.Node = "controller-node" })
}

// TestHelperProvisionAndDelete: a claim on another node is provisioned and
// deleted through helper pods, which are deleted once read.
func TestHelperProvisionAndDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	seen := podruntest.Kubelet(ctx, t, c, helperNS, runsHelper(t))
	p, dir := helperProvisioner(t, newHelperDirs(t, c, time.Minute))
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	if !p.ShouldProvision(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{controller.AnnSelectedNode: "worker-7"}}}) {
		t.Error("helper pods serve every node, but ShouldProvision refuses worker-7")
	}
	_, state, err := p.Provision(ctx, o)
	if !errors.Is(err, ErrInProgress) || state != controller.ProvisioningInBackground {
		t.Fatalf("first Provision: %v %v, want it in background while its pod runs", state, err)
	}
	pv, err := untilEnded(ctx, t, func() (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(ctx, o)
		return pv, err
	})
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	pod := <-seen
	if pod.Spec.NodeName != "worker-7" || pod.Name != "hostpath-create-pvc-uid-1" {
		t.Errorf("pod %s on node %q", pod.Name, pod.Spec.NodeName)
	}
	if pv.Annotations[AnnNode] != "worker-7" || pv.Spec.HostPath.Path != filepath.Join(dir, "pvc-uid-1") {
		t.Errorf("pv %v %v", pv.Annotations, pv.Spec.HostPath)
	}
	if _, err := os.Stat(filepath.Join(dir, "pvc-uid-1")); err != nil {
		t.Errorf("directory not made: %v", err)
	}
	assertNoPods(t, ctx, c)

	pv.UID = "pv-uid"
	if _, err := untilEnded(ctx, t, func() (any, error) { return nil, p.Delete(ctx, pv) }); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	rm := <-seen
	if rm.Spec.NodeName != "worker-7" || rm.OwnerReferences[0].Kind != "PersistentVolume" || rm.OwnerReferences[0].UID != "pv-uid" {
		t.Errorf("remove pod on %q owned by %v", rm.Spec.NodeName, rm.OwnerReferences)
	}
	assertEmpty(t, dir)
	assertNoPods(t, ctx, c)
}

func assertNoPods(t *testing.T, ctx context.Context, c kubernetes.Interface) {
	t.Helper()
	list, err := c.CoreV1().Pods(helperNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d helper pods left, want them deleted once read", len(list.Items))
	}
}

// TestHelperFailures: what a user reads in the claim's event when a helper
// pod fails, cannot pull its image or never runs.
func TestHelperFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status func(*corev1.Pod) corev1.PodStatus
		want   []string
		state  controller.ProvisioningState
	}{{
		name: "helper refuses",
		status: func(*corev1.Pod) corev1.PodStatus {
			return terminatedHelper(corev1.PodFailed, 1, `{"error":"/data/x exists and is not a directory: remove it from the node"}`)
		},
		want:  []string{"helper pod kubeprov-hostpath/hostpath-create-pvc-uid-1", "node worker-7", "exit code 1", "is not a directory"},
		state: controller.ProvisioningFinished,
	}, {
		name: "image pull",
		status: func(*corev1.Pod) corev1.PodStatus {
			return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name: HelperContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}},
			}}}
		},
		want:  []string{"hostpath-create-pvc-uid-1", "did not start within --helper-timeout 1s", "ErrImagePull not found"},
		state: controller.ProvisioningFinished,
	}, {
		name: "rejected by the kubelet",
		status: func(*corev1.Pod) corev1.PodStatus {
			return corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu"}
		},
		want:  []string{"hostpath-create-pvc-uid-1", "failed before it started: OutOfcpu"},
		state: controller.ProvisioningFinished,
	}, {
		// The kubelet ends a pod whose volume it cannot mount at its
		// activeDeadlineSeconds and reports a container it never started.
		name: "ended at its deadline before it started",
		status: func(*corev1.Pod) corev1.PodStatus {
			return corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", ContainerStatuses: []corev1.ContainerStatus{{
				Name: HelperContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown"}},
			}}}
		},
		want:  []string{"hostpath-create-pvc-uid-1", "did not start within --helper-timeout", "ContainerStatusUnknown", "see the pod's events"},
		state: controller.ProvisioningFinished,
	}, {
		name:   "killed without a result",
		status: func(*corev1.Pod) corev1.PodStatus { return terminatedHelper(corev1.PodFailed, 137, "") },
		want:   []string{"hostpath-create-pvc-uid-1", "exit code 137", "without a result"},
		state:  controller.ProvisioningInBackground,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := newHelperClient()
			podruntest.Kubelet(ctx, t, c, helperNS, tc.status)
			p, dir := helperProvisioner(t, newHelperDirs(t, c, time.Second))
			o := options(claim(corev1.ReadWriteOnce))
			o.SelectedNodeName = "worker-7"
			state, err := untilEnded(ctx, t, func() (controller.ProvisioningState, error) {
				_, state, err := p.Provision(ctx, o)
				return state, err
			})
			assertFailedCleanly(ctx, t, c, dir, state, err, tc.state, tc.want)
		})
	}
}

// assertFailedCleanly checks a failed Provision: its state, an error that
// says each of want, and neither a directory nor a helper pod left.
func assertFailedCleanly(ctx context.Context, t *testing.T, c kubernetes.Interface, dir string,
	state controller.ProvisioningState, err error, wantState controller.ProvisioningState, want []string) {
	t.Helper()
	if err == nil {
		t.Fatal("Provision succeeded")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if state != wantState {
		t.Errorf("state %s, want %s", state, wantState)
	}
	assertEmpty(t, dir)
	assertNoPods(t, ctx, c)
}

// TestHelperRefusesPlantedPod: a pod someone else created with the helper
// pod's name is neither used nor deleted, whatever it differs in.
func TestHelperRefusesPlantedPod(t *testing.T) {
	h := newHelperDirs(t, fake.NewClientset(), time.Minute)
	req := HelperRequest{Action: HelperCreate, Roots: []string{"/data"}, Rel: "pvc-uid-1", Mode: 0o777, SizeBytes: 3 << 30}
	ours := h.Pod(HelperOp{Node: "worker-7", PV: "pvc-uid-1", Request: req})
	for _, tc := range []struct {
		name  string
		plant func(*corev1.Pod)
	}{
		{"mounts the node's root", func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/" }},
		{"another image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil:latest" }},
		{"a command", func(p *corev1.Pod) {
			p.Spec.Containers[0].Command = []string{"sh", "-c", "echo '{\"root\":\"/data\"}'"}
		}},
		{"another node", func(p *corev1.Pod) { p.Spec.NodeName = "worker-1" }},
		{"privileged", func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true) }},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{"an init container", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "x", Image: "evil"}} }},
		{"no labels", func(p *corev1.Pod) { p.Labels = nil }},
		{"a service account token", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }},
		{"another directory", func(p *corev1.Pod) { p.Spec.Containers[0].Args[3] = "--rel=other" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			planted := ours.DeepCopy()
			tc.plant(planted)
			// It already ran and "succeeded".
			planted.Status = terminatedHelper(corev1.PodSucceeded, 0, `{"root":"/data"}`)
			c := newHelperClient(planted)
			_, err := newHelperDirs(t, c, time.Minute).Create(ctx, CreateRequest{
				Node: "worker-7", PV: "pvc-uid-1", Roots: req.Roots, Rel: req.Rel, Mode: req.Mode, SizeBytes: req.SizeBytes,
			})
			if err == nil || !strings.Contains(err.Error(), "is not the create pod this provisioner creates") {
				t.Fatalf("error %v, want a refusal", err)
			}
			if _, err := c.CoreV1().Pods(helperNS).Get(ctx, ours.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("the planted pod was deleted: %v", err)
			}
		})
	}
	// The same pod as ours, from an earlier attempt, is taken: its result
	// is read and it is deleted.
	_, ctx := ktesting.NewTestContext(t)
	earlier := ours.DeepCopy()
	earlier.Status = terminatedHelper(corev1.PodSucceeded, 0, `{"root":"/data"}`)
	c := newHelperClient(earlier)
	root, err := newHelperDirs(t, c, time.Minute).Create(ctx, CreateRequest{
		Node: "worker-7", PV: "pvc-uid-1", Roots: req.Roots, Rel: req.Rel, Mode: req.Mode, SizeBytes: req.SizeBytes,
	})
	if err != nil || root != "/data" {
		t.Fatalf("adopting the earlier attempt's pod: %q, %v", root, err)
	}
	assertNoPods(t, ctx, c)
	// A root the request did not name is not believed.
	earlier.Status = terminatedHelper(corev1.PodSucceeded, 0, `{"root":"/etc"}`)
	c = newHelperClient(earlier)
	_, err = newHelperDirs(t, c, time.Minute).Create(ctx, CreateRequest{
		Node: "worker-7", PV: "pvc-uid-1", Roots: req.Roots, Rel: req.Rel, Mode: req.Mode, SizeBytes: req.SizeBytes,
	})
	if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), `answered root "/etc"`) {
		t.Errorf("error %v", err)
	}
}
