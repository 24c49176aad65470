// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/podrun/podruntest"
)

// The shapes of local-path's README and quota example: a script reading
// local-path's -p/-s/-m arguments with getopts, and one reading VOL_*.
const (
	quotaSetup = `#!/bin/sh
set -eu
while getopts "m:s:p:a:" opt; do
  case $opt in
    p) absolutePath=$OPTARG ;;
    s) sizeInBytes=$OPTARG ;;
    m) volMode=$OPTARG ;;
    a) action=$OPTARG ;;
  esac
done
mkdir -m 0750 -p "$VOL_DIR"
echo "$VOL_SIZE_BYTES $VOL_MODE $sizeInBytes $volMode $action $absolutePath" > "$VOL_DIR/.quota"
`
	quotaTeardown = `#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
`
	busyboxTemplate = `apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  tolerations:
  - key: node.kubernetes.io/disk-pressure
    operator: Exists
    effect: NoSchedule
  containers:
  - name: helper-pod
    image: busybox
    imagePullPolicy: IfNotPresent
`
)

// writeLocalPathConfig writes local-path's ConfigMap keys into a directory,
// as the ConfigMap volume does, and returns config.json's path.
func writeLocalPathConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "config.json")
}

// TestScriptsNeedHelperPods: without --helper-pods each of local-path's
// script keys is refused with where to turn (helper pods); with it, a
// complete set is read, and an incomplete one names what is missing.
func TestScriptsNeedHelperPods(t *testing.T) {
	paths := `"nodePathMap":[{"node":"n1","paths":["/a"]}]`
	for name, files := range map[string]map[string]string{
		"setupCommand":      {"config.json": `{` + paths + `,"setupCommand":"/manager","teardownCommand":"/manager"}`, FileHelperPod: busyboxTemplate},
		"cmdTimeoutSeconds": {"config.json": `{` + paths + `,"cmdTimeoutSeconds":30}`, FileSetup: quotaSetup, FileTeardown: quotaTeardown, FileHelperPod: busyboxTemplate},
		"scripts":           {"config.json": `{` + paths + `}`, FileSetup: quotaSetup, FileTeardown: quotaTeardown, FileHelperPod: busyboxTemplate},
	} {
		config := writeLocalPathConfig(t, files)
		_, _, err := LoadConfig(config, false)
		if !errors.Is(err, ErrScriptsNeedHelperPods) || !strings.Contains(err.Error(), "--helper-pods (chart value mode: helper-pods") {
			t.Errorf("%s without helper pods: %v, want it refused, pointing to --helper-pods", name, err)
		}
		if _, err := New(Config{ConfigFile: config, Node: node}); err == nil {
			t.Errorf("%s: the provisioner starts without helper pods", name)
		}
		m, _, err := LoadConfig(config, true)
		if err != nil || m.Scripts == nil {
			t.Errorf("%s with helper pods: %v", name, err)
		}
	}
	for files, want := range map[*map[string]string]string{
		{"config.json": `{` + paths + `}`, FileSetup: quotaSetup, FileHelperPod: busyboxTemplate}:                                   "no teardown: give the ConfigMap key teardown",
		{"config.json": `{` + paths + `}`, FileSetup: quotaSetup, FileTeardown: quotaTeardown}:                                      "no helperPod.yaml",
		{"config.json": `{` + paths + `,"cmdTimeoutSeconds":0}`, FileSetup: "x", FileTeardown: "x", FileHelperPod: busyboxTemplate}: "cmdTimeoutSeconds 0 must be positive",
		{"config.json": `{` + paths + `,"setupCommand":"manager","teardownCommand":"/m"}`, FileHelperPod: busyboxTemplate}:          `setupCommand "manager" must be the absolute path`,
	} {
		if _, _, err := LoadConfig(writeLocalPathConfig(t, *files), true); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want an ErrConfig containing %q", (*files)["config.json"], err, want)
		}
	}
}

// TestHelperTemplateRefusals: what helperPod.yaml may not add to the pod
// the provisioner builds, each refusal naming the field.
func TestHelperTemplateRefusals(t *testing.T) {
	base := "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	for extra, want := range map[string]string{
		"  volumes:\n  - name: etc\n    hostPath: {path: /etc}\n": "spec.volumes is not supported: the pod gets exactly one host path",
		"    volumeMounts:\n    - {name: etc, mountPath: /etc}\n": "spec.containers[0].volumeMounts is not supported",
		"  hostPID: true\n":                                  "spec.hostPID is not supported",
		"  nodeName: other\n":                                "spec.nodeName is not supported",
		"  serviceAccountName: admin\n":                      "spec.serviceAccountName is not supported",
		"  securityContext: {runAsUser: 0}\n":                "spec.securityContext is not supported: set it on the container",
		"    command: [/bin/evil]\n":                         "spec.containers[0].command is not supported",
		"  - name: d\n    image: busybox\n":                  "has 2 containers, want exactly one",
		"    env:\n    - name: VOL_DIR\n      value: /etc\n": "env VOL_DIR: the provisioner sets it",
		"    env:\n    - name: X\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n": "valueFrom is not supported",
	} {
		if _, err := parseHelperTemplate(base + extra); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("template with\n%s: %v, want an error containing %q", extra, err, want)
		}
	}
	pod, err := parseHelperTemplate(base + "    securityContext: {privileged: true}\n")
	if err != nil || !*pod.Spec.Containers[0].SecurityContext.Privileged {
		t.Errorf("a privileged script container: %v", err)
	}
}

// runsScript is a kubelet that runs the script pod's init container (the
// built-in helper's path check, with RunHelper), then its container with
// this machine's /bin/sh, with the pod's command, arguments and
// environment: the root is mounted at its own path, so the paths are the
// node's. The script's working directory is a temporary one.
func runsScript(t *testing.T) func(*corev1.Pod) corev1.PodStatus {
	return runsScriptIn(t, t.TempDir())
}

// runsScriptIn is runsScript with the working directory cwd: a relative
// path or glob in a script acts there (never in the test's package).
func runsScriptIn(t *testing.T, cwd string) func(*corev1.Pod) corev1.PodStatus {
	return func(pod *corev1.Pod) corev1.PodStatus {
		if len(pod.Spec.InitContainers) != 1 {
			t.Errorf("script pod with init containers %v, want the path check", pod.Spec.InitContainers)
		} else if res := RunHelper(context.Background(), parseHelperArgs(t, pod.Spec.InitContainers[0].Args)); res.Error != "" {
			b, _ := json.Marshal(res)
			return corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{
				Name: pod.Spec.InitContainers[0].Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: string(b), StartedAt: metav1.Now()}},
			}}, ContainerStatuses: []corev1.ContainerStatus{{Name: HelperContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}
		}
		c := pod.Spec.Containers[0]
		cmd := exec.Command(c.Command[0], append(c.Command[1:], c.Args...)...) //nolint:gosec // the test's own script
		cmd.Dir = cwd
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		for _, e := range c.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return terminatedHelper(corev1.PodFailed, 1, out.String())
		}
		return terminatedHelper(corev1.PodSucceeded, 0, out.String())
	}
}

func scriptProvisioner(t *testing.T, h *HelperDirs, setup, teardown string) (*Provisioner, string) {
	t.Helper()
	dir := t.TempDir()
	return scriptProvisionerAt(t, h, dir, setup, teardown), dir
}

// scriptProvisionerAt is scriptProvisioner with the node path dir.
func scriptProvisionerAt(t *testing.T, h *HelperDirs, dir, setup, teardown string) *Provisioner {
	t.Helper()
	config := writeLocalPathConfig(t, map[string]string{
		"config.json": `{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["` + dir + `"]}],"cmdTimeoutSeconds":30}`,
		FileSetup:     setup, FileTeardown: teardown, FileHelperPod: busyboxTemplate,
	})
	p, _ := newProvisioner(t, func(c *Config) { c.Dirs = h; c.Node = "controller-node"; c.ConfigFile = config })
	return p
}

// TestScriptsProvisionAndDelete: local-path's quota-style setup runs in the
// template's image with local-path's inputs, on the claim's node, with the
// script itself and the chosen root in the pod spec; the teardown removes
// the directory.
func TestScriptsProvisionAndDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	seen := podruntest.Kubelet(ctx, t, c, helperNS, runsScript(t))
	p, dir := scriptProvisioner(t, newHelperDirs(t, c, time.Minute), quotaSetup, quotaTeardown)
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	pv, err := untilEnded(ctx, t, func() (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(ctx, o)
		return pv, err
	})
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	vol := filepath.Join(dir, "pvc-uid-1")
	if pv.Spec.HostPath.Path != vol {
		t.Errorf("PV path %s, want %s", pv.Spec.HostPath.Path, vol)
	}
	got, err := os.ReadFile(filepath.Join(vol, ".quota"))
	if want := "3221225472 Filesystem 3221225472 Filesystem create " + vol + "\n"; err != nil || string(got) != want {
		t.Errorf("the setup script recorded %q (%v), want %q", got, err, want)
	}
	if st, err := os.Stat(vol); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("directory %v %v, want the script's mode 0750", st, err)
	}
	pod := <-seen
	ctr := pod.Spec.Containers[0]
	if ctr.Image != "busybox" || ctr.Command[2] != quotaSetup || pod.Spec.NodeName != "worker-7" || pod.Spec.PriorityClassName != "system-node-critical" ||
		*pod.Spec.ActiveDeadlineSeconds != 30 || len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].HostPath.Path != dir {
		t.Errorf("setup pod: image %s command %q node %s priority %q deadline %d volumes %v",
			ctr.Image, ctr.Command, pod.Spec.NodeName, pod.Spec.PriorityClassName, *pod.Spec.ActiveDeadlineSeconds, pod.Spec.Volumes)
	}
	assertNoPods(t, ctx, c)

	pv.UID = "pv-uid"
	if _, err := untilEnded(ctx, t, func() (any, error) { return nil, p.Delete(ctx, pv) }); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if rm := <-seen; rm.Spec.Containers[0].Command[2] != quotaTeardown || rm.Spec.Containers[0].Args[7] != "delete" {
		t.Errorf("teardown pod runs %q %q", rm.Spec.Containers[0].Command, rm.Spec.Containers[0].Args)
	}
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Errorf("after teardown: %v, want the directory gone", err)
	}
	assertNoPods(t, ctx, c)
}

// TestScriptsFailedSetup: a setup that fails after making the directory is
// reported with its output, the teardown removes what it made, and no PV
// and no pod are left.
func TestScriptsFailedSetup(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	podruntest.Kubelet(ctx, t, c, helperNS, runsScript(t))
	p, dir := scriptProvisioner(t, newHelperDirs(t, c, time.Minute), "mkdir -p \"$VOL_DIR\"\necho disk quota unsupported >&2\nexit 3\n", quotaTeardown)
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	var state controller.ProvisioningState
	pv, err := untilEnded(ctx, t, func() (*corev1.PersistentVolume, error) {
		pv, s, err := p.Provision(ctx, o)
		state = s
		return pv, err
	})
	for _, want := range []string{"exited with code 1: disk quota unsupported", "the teardown script ran after it"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Provision: %v, want %q", err, want)
		}
	}
	if pv != nil || state != controller.ProvisioningFinished {
		t.Errorf("Provision: pv %v, state %v", pv, state)
	}
	assertEmpty(t, dir)
	assertNoPods(t, ctx, c)
}

// TestScriptsFailedTeardown: a teardown that fails is Delete's error, with
// its output (the controller's Warning, the PV stays Released), and the
// directory stays; no pod is left.
func TestScriptsFailedTeardown(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	podruntest.Kubelet(ctx, t, c, helperNS, runsScript(t))
	p, dir := scriptProvisioner(t, newHelperDirs(t, c, time.Minute), quotaSetup, "echo volume busy >&2\nexit 1\n")
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	pv, err := untilEnded(ctx, t, func() (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(ctx, o)
		return pv, err
	})
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	_, err = untilEnded(ctx, t, func() (any, error) { return nil, p.Delete(ctx, pv) })
	if err == nil || !strings.Contains(err.Error(), "volume busy") {
		t.Errorf("Delete: %v, want the teardown's output", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pvc-uid-1")); err != nil {
		t.Errorf("after a failed teardown: %v, want the directory kept", err)
	}
	assertNoPods(t, ctx, c)
}

// TestScriptsRefuseLinks: a link where the volume's directory goes (say,
// to another volume's directory) is refused by the path check before the
// setup script runs, so the script never writes through it.
func TestScriptsRefuseLinks(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	podruntest.Kubelet(ctx, t, c, helperNS, runsScript(t))
	p, dir := scriptProvisioner(t, newHelperDirs(t, c, time.Minute), quotaSetup, quotaTeardown)
	other := t.TempDir()
	if err := os.Symlink(other, filepath.Join(dir, "pvc-uid-1")); err != nil {
		t.Fatal(err)
	}
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	pv, err := untilEnded(ctx, t, func() (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(ctx, o)
		return pv, err
	})
	if pv != nil || err == nil || !strings.Contains(err.Error(), "the path check before the script refused the path, and the script did not run: path goes through a symbolic link: pvc-uid-1") {
		t.Errorf("Provision through a link: %v, %v", pv, err)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("the link's target holds %v, want it untouched", entries)
	}
	assertNoPods(t, ctx, c)
}

// TestScriptsTimeout: a setup still running at cmdTimeoutSeconds is given
// up (its pod deleted), the teardown removes what it made so far, and the
// claim's error says which bound it passed.
func TestScriptsTimeout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	scripts := runsScript(t)
	podruntest.Kubelet(ctx, t, c, helperNS, func(pod *corev1.Pod) corev1.PodStatus {
		st := scripts(pod)
		if pod.Labels[LabelHelperAction] == HelperCreate {
			// Its work done, the setup hangs (a quota tool that never returns).
			st = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: HelperContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			}}}
		}
		return st
	})
	h := newHelperDirs(t, c, time.Minute)
	p, dir := scriptProvisioner(t, h, quotaSetup, quotaTeardown)
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "worker-7"
	start := time.Now()
	if _, _, err := p.Provision(ctx, o); !errors.Is(err, ErrInProgress) {
		t.Fatalf("Provision: %v, want the setup in progress", err)
	}
	if _, err := untilEnded(ctx, t, func() (any, error) {
		// Until the kubelet has reported it running: a pod created, not past its bound.
		pod, err := c.CoreV1().Pods(helperNS).Get(ctx, "hostpath-create-pvc-uid-1", metav1.GetOptions{})
		if err != nil || pod.Status.Phase != corev1.PodRunning {
			return nil, ErrInProgress
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pvc-uid-1", ".quota")); err != nil {
		t.Fatalf("the setup did not run: %v", err)
	}
	// The next look at the setup pod is past cmdTimeoutSeconds (30) and
	// its margin; the teardown pod it starts then runs in real time.
	var looked atomic.Bool
	h.now = func() time.Time {
		if looked.CompareAndSwap(false, true) {
			return start.Add(45 * time.Second)
		}
		return time.Now()
	}
	_, err := untilEnded(ctx, t, func() (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(ctx, o)
		return pv, err
	})
	for _, want := range []string{"did not finish within cmdTimeoutSeconds 30s", "the teardown script ran after it"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Provision past the bound: %v, want %q", err, want)
		}
	}
	assertEmpty(t, dir)
	assertNoPods(t, ctx, c)
}

// TestScriptsRefusePlantedPod: the scripts are in the pod spec, so a pod of
// the setup pod's name that runs another script, skips the path check or
// mounts more is neither trusted nor deleted; the one the provisioner
// would create is taken.
func TestScriptsRefusePlantedPod(t *testing.T) {
	config := writeLocalPathConfig(t, map[string]string{
		"config.json": `{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/data"]}]}`,
		FileSetup:     quotaSetup, FileTeardown: quotaTeardown, FileHelperPod: busyboxTemplate,
	})
	m, _, err := LoadConfig(config, true)
	if err != nil {
		t.Fatal(err)
	}
	h := newHelperDirs(t, newHelperClient(), time.Minute)
	req := HelperRequest{Action: HelperCreate, Roots: []string{"/data"}, Rel: "pvc-uid-1", SizeBytes: 3 << 30}
	ours := h.Pod(HelperOp{Node: "worker-7", PV: "pvc-uid-1", Request: req, Scripts: m.Scripts, Root: "/data"})
	for name, plant := range map[string]func(*corev1.Pod){
		"another script":   func(p *corev1.Pod) { p.Spec.Containers[0].Command[2] = "echo ok" },
		"no path check":    func(p *corev1.Pod) { p.Spec.InitContainers = nil },
		"another VOL_DIR":  func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "/etc" },
		"the host's root":  func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/" },
		"privileged":       func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true) },
		"a longer timeout": func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600) },
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			planted := ours.DeepCopy()
			plant(planted)
			planted.Status = terminatedHelper(corev1.PodSucceeded, 0, "")
			c := newHelperClient(planted)
			_, err := newHelperDirs(t, c, time.Minute).Create(ctx, CreateRequest{
				Node: "worker-7", PV: "pvc-uid-1", Roots: req.Roots, Rel: req.Rel, SizeBytes: req.SizeBytes, Scripts: m.Scripts,
			})
			if err == nil || !strings.Contains(err.Error(), "is not the create pod this provisioner creates") {
				t.Fatalf("error %v, want a refusal", err)
			}
			if _, err := c.CoreV1().Pods(helperNS).Get(ctx, ours.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("the planted pod was deleted: %v", err)
			}
		})
	}
	_, ctx := ktesting.NewTestContext(t)
	earlier := ours.DeepCopy()
	earlier.Status = terminatedHelper(corev1.PodSucceeded, 0, "")
	root, err := newHelperDirs(t, newHelperClient(earlier), time.Minute).Create(ctx, CreateRequest{
		Node: "worker-7", PV: "pvc-uid-1", Roots: req.Roots, Rel: req.Rel, SizeBytes: req.SizeBytes, Scripts: m.Scripts,
	})
	if err != nil || root != "/data" {
		t.Errorf("the earlier attempt's own pod: %q %v, want it taken", root, err)
	}
}
