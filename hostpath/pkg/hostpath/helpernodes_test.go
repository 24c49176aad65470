// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
)

// TestHelperNodeChecks: a claim whose selected node does not exist, is
// cordoned or not Ready, or is one the helper pods may not go to, gets no
// helper pod and an error naming the node (and the taint or labels) at
// once, instead of a pod that waits until --helper-timeout.
func TestHelperNodeChecks(t *testing.T) {
	controlPlane := readyNode("cp-1")
	controlPlane.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	cordoned := readyNode("cordoned")
	cordoned.Spec.Unschedulable = true
	notReady := readyNode("not-ready")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	// Ready already, the node lifecycle controller has not removed its
	// not-ready taint yet (and never does without one, as in the
	// integration tests).
	fresh := readyNode("fresh")
	fresh.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	preferred := readyNode("preferred")
	preferred.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}

	for _, tc := range []struct {
		name, node string
		cfg        func(*HelperConfig)
		want       []string
		state      controller.ProvisioningState
	}{
		{name: "missing", node: "ghost-node", want: []string{"node ghost-node does not exist"}, state: controller.ProvisioningNoChange},
		{name: "cordoned", node: "cordoned", want: []string{"node cordoned is cordoned"}, state: controller.ProvisioningNoChange},
		{name: "not ready", node: "not-ready", want: []string{"node not-ready is not Ready"}, state: controller.ProvisioningNoChange},
		{name: "control plane", node: "cp-1",
			want:  []string{"helper pods may not run on node cp-1", "node-role.kubernetes.io/control-plane:NoSchedule is not tolerated", "--helper-toleration"},
			state: controller.ProvisioningNoChange},
		{name: "another toleration", node: "cp-1",
			cfg: func(c *HelperConfig) {
				c.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			},
			want:  []string{"node-role.kubernetes.io/control-plane:NoSchedule is not tolerated"},
			state: controller.ProvisioningNoChange},
		{name: "node selector", node: "worker-7",
			cfg:   func(c *HelperConfig) { c.NodeSelector = map[string]string{"storage": "local"} },
			want:  []string{"helper pods may not run on node worker-7", "storage=local", "--helper-node-selector"},
			state: controller.ProvisioningNoChange},
		{name: "tolerated", node: "cp-1",
			cfg: func(c *HelperConfig) {
				c.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
			}},
		{name: "selected", node: "worker-7",
			cfg: func(c *HelperConfig) { c.NodeSelector = map[string]string{corev1.LabelHostname: "worker-7"} }},
		{name: "only preferred", node: "preferred"},
		{name: "ready, not-ready taint not yet removed", node: "fresh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := newHelperClient(controlPlane, cordoned, notReady, preferred, fresh)
			cfg := HelperConfig{Client: c, Namespace: helperNS, Image: "hostpath-provisioner:test"}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h, err := NewHelperDirs(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p, dir := helperProvisioner(t, h)
			o := options(claim(corev1.ReadWriteOnce))
			o.SelectedNodeName = tc.node
			_, state, err := p.Provision(ctx, o)
			if tc.want == nil {
				// Allowed: its pod is made, with the policy's selector
				// and tolerations, and runs.
				if !errors.Is(err, ErrInProgress) || state != controller.ProvisioningInBackground {
					t.Fatalf("Provision: %s %v, want its helper pod in progress", state, err)
				}
				pod, err := c.CoreV1().Pods(helperNS).Get(ctx, "hostpath-create-pvc-uid-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if pod.Spec.NodeName != tc.node || len(pod.Spec.Tolerations) != len(cfg.Tolerations) || len(pod.Spec.NodeSelector) != len(cfg.NodeSelector) {
					t.Errorf("pod on %s with tolerations %v, selector %v; want the policy's %v, %v",
						pod.Spec.NodeName, pod.Spec.Tolerations, pod.Spec.NodeSelector, cfg.Tolerations, cfg.NodeSelector)
				}
				return
			}
			assertFailedCleanly(ctx, t, c, dir, state, err, tc.state, tc.want)
		})
	}
}

// TestHelperPodDefaultsTolerateNothing: without --helper-toleration a
// helper pod tolerates no taint (it used to tolerate every one).
func TestHelperPodDefaultsTolerateNothing(t *testing.T) {
	h := newHelperDirs(t, newHelperClient(), time.Minute)
	pod := h.Pod(HelperOp{Node: "worker-1", PV: "pvc-1", Request: HelperRequest{Action: HelperCreate, Roots: []string{"/data"}, Rel: "pvc-1"}})
	if len(pod.Spec.Tolerations) != 0 || len(pod.Spec.NodeSelector) != 0 {
		t.Errorf("tolerations %v, node selector %v: want none", pod.Spec.Tolerations, pod.Spec.NodeSelector)
	}
	if _, err := NewHelperDirs(HelperConfig{Client: newHelperClient(), Namespace: helperNS, Image: "x",
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}); err == nil || !strings.Contains(err.Error(), "never tolerate every taint") {
		t.Errorf("a toleration of every taint: %v, want it refused", err)
	}
}

// TestHelperNeverWaits: Provision returns while the helper pod has not
// ended (no kubelet runs it here), and a later call comes back to the same
// pod; past --helper-timeout the pod is deleted and the claim told why.
func TestHelperNeverWaits(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	h := newHelperDirs(t, c, time.Minute)
	p, _ := helperProvisioner(t, h)
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	start := time.Now()
	for range 3 {
		_, state, err := p.Provision(ctx, o)
		if !errors.Is(err, ErrInProgress) || state != controller.ProvisioningInBackground ||
			!strings.Contains(err.Error(), "helper pod kubeprov-hostpath/hostpath-create-pvc-uid-1") {
			t.Fatalf("Provision: %s %v, want the running pod named, in background", state, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("three Provision calls took %s: they waited for the pod", d)
	}
	list, err := c.CoreV1().Pods(helperNS).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("pods %v, %v: want the one pod, found again by its name", list, err)
	}
	h.now = func() time.Time { return start.Add(2 * time.Minute) }
	_, state, err := p.Provision(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "did not start within --helper-timeout 1m0s") || state != controller.ProvisioningFinished {
		t.Errorf("past the timeout: %s %v", state, err)
	}
	assertNoPods(t, ctx, c)
}

// TestHelperPodsPerNamespace: one namespace has at most PodsPerNamespace
// helper pods at once; its further claims wait (nothing created, nothing
// changed) while other namespaces' claims get their pods.
func TestHelperPodsPerNamespace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	h, err := NewHelperDirs(HelperConfig{Client: c, Namespace: helperNS, Image: "hostpath-provisioner:test", PodsPerNamespace: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := helperProvisioner(t, h)
	provision := func(ns, uid string) (controller.ProvisioningState, error) {
		o := options(claim(corev1.ReadWriteOnce))
		o.PVC.Namespace, o.PVC.UID, o.PVName = ns, types.UID("uid-"+uid), "pvc-"+uid
		o.SelectedNodeName = "worker-7"
		_, state, err := p.Provision(ctx, o)
		return state, err
	}
	for _, uid := range []string{"a1", "a2"} {
		if _, err := provision("tenant-a", uid); !errors.Is(err, ErrInProgress) {
			t.Fatalf("claim %s: %v, want its pod made", uid, err)
		}
	}
	state, err := provision("tenant-a", "a3")
	if !errors.Is(err, ErrNamespaceBusy) || state != controller.ProvisioningNoChange ||
		!strings.Contains(err.Error(), "namespace tenant-a already has 2 helper pods (--helper-pods-per-namespace 2)") {
		t.Errorf("third claim of tenant-a: %s %v, want it to wait", state, err)
	}
	if _, err := c.CoreV1().Pods(helperNS).Get(ctx, "hostpath-create-pvc-a3", metav1.GetOptions{}); err == nil {
		t.Error("a pod was made for the third claim")
	}
	if _, err := provision("tenant-b", "b1"); !errors.Is(err, ErrInProgress) {
		t.Errorf("tenant-b's claim: %v, want its pod made whatever tenant-a has", err)
	}
	// tenant-a's first pod ends and is read: its place is free again.
	done, err := c.CoreV1().Pods(helperNS).Get(ctx, "hostpath-create-pvc-a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots, _ := p.Paths().PathsFor("worker-7")
	done.Status = terminatedHelper(corev1.PodSucceeded, 0, `{"root":"`+roots[0]+`"}`)
	if _, err := c.CoreV1().Pods(helperNS).UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if state, err := provision("tenant-a", "a1"); err != nil {
		t.Fatalf("reading the ended pod: %s %v", state, err)
	}
	if _, err := provision("tenant-a", "a3"); !errors.Is(err, ErrInProgress) {
		t.Errorf("third claim after one pod ended: %v, want its pod made", err)
	}
}

func TestParseToleration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want corev1.Toleration
		err  string
	}{
		{in: "node-role.kubernetes.io/control-plane:NoSchedule",
			want: corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		{in: "gpu=nvidia:NoExecute", want: corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "nvidia", Effect: corev1.TaintEffectNoExecute}},
		{in: "dedicated", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		{in: "", err: "needs a taint key"},
		{in: ":NoSchedule", err: "needs a taint key"},
		{in: "gpu:Sometimes", err: `effect "Sometimes"`},
		{in: "bad key!", err: "key:"},
	} {
		got, err := ParseToleration(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseToleration(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseToleration(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
