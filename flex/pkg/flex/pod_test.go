// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/podrun/podruntest"
)

const provNS = "sys"

func configMap(name string, labels, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: provNS, Name: name, Labels: labels}, Data: data}
}

// newClient is a fake clientset that stamps created pods with a creation
// time, as the API server does (the launcher's wait bound counts from it).
func newClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateActionImpl).Object.(*corev1.Pod).CreationTimestamp = metav1.Now()
		return false, nil, nil
	})
	return c
}

var classLabels = map[string]string{LabelStorageClass: "gold", LabelType: TypeProvisionerConfig}

func terminatedStatus(phase corev1.PodPhase, code int32, msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}},
	}}}
}

func provisionCall(t *testing.T, params map[string]string) *Call {
	t.Helper()
	o := testOptions("1Gi", params)
	in, err := NewInput(o)
	if err != nil {
		t.Fatal(err)
	}
	return &Call{PVName: o.PVName, Input: in, Options: &o, Record: map[string]string{AnnIdentity: "me"}}
}

func TestPodLauncherProvisionThroughTerminationMessage(t *testing.T) {
	ctx := t.Context()
	c := newClient(configMap("gold", classLabels, map[string]string{
		ConfigImage: "img:v1", ConfigNodeSelector: "disk=ssd", ConfigHostPath: "/srv/v", "zone": "west", "pool": "cm",
	}))
	seen := podruntest.Kubelet(ctx, t, c, provNS, func(*corev1.Pod) corev1.PodStatus {
		return terminatedStatus(corev1.PodSucceeded, 0, `{"status": "Success", "volume": {"hostPath": {"path": "/srv/v/x"}}}`)
	})
	l := &PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey, Deadline: 90 * time.Second}
	call := provisionCall(t, map[string]string{ParamSecretName: "creds", "pool": "class"})
	res, _, err := l.Provision(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output == nil || !strings.Contains(string(res.Output.Volume), "/srv/v/x") {
		t.Errorf("result = %+v", res)
	}
	pod := <-seen
	if pod.Name != "flex-provision-pvc-123" || pod.Labels[LabelAction] != ActionProvision || pod.Labels[LabelPV] != "pvc-123" || pod.Labels[LabelManagedBy] != ManagedBy {
		t.Errorf("pod %s labels %v", pod.Name, pod.Labels)
	}
	spec := pod.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever || *spec.ActiveDeadlineSeconds != 90 || spec.NodeSelector["disk"] != "ssd" ||
		*spec.AutomountServiceAccountToken || len(pod.OwnerReferences) != 0 {
		t.Errorf("pod spec = %+v, owners %v", spec, pod.OwnerReferences)
	}
	ctr := spec.Containers[0]
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	// Class parameters override ConfigMap properties.
	for k, v := range map[string]string{EnvAction: "provision", "FLEX_PARAM_ZONE": "west", "FLEX_PARAM_POOL": "class", EnvSecretDir: SecretMountPath,
		EnvTerminationLog: TerminationMessagePath, "FLEX_PVC_NAME": "data", "FLEX_REQUEST_BYTES": "1073741824"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if in, err := ParseInput(env[EnvInput]); err != nil || in["zone"] != "west" {
		t.Errorf("FLEX_INPUT = %q", env[EnvInput])
	}
	if ctr.Image != "img:v1" || ctr.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || len(ctr.VolumeMounts) != 2 || len(spec.Volumes) != 2 {
		t.Errorf("container = %+v, volumes %+v", ctr, spec.Volumes)
	}
	if s := spec.Volumes[1].Secret; s == nil || s.SecretName != "creds" || !ctr.VolumeMounts[1].ReadOnly {
		t.Errorf("secret volume = %+v", spec.Volumes[1])
	}
	var cfg PodConfig
	if err := json.Unmarshal([]byte(call.Record[AnnPod]), &cfg); err != nil || cfg.SecretName != "creds" || cfg.Image != "img:v1" || cfg.ConfigMap != "sys/gold" {
		t.Errorf("recorded %s = %q", AnnPod, call.Record[AnnPod])
	}
	if call.Input["zone"] != "west" {
		t.Errorf("input lacks the ConfigMap property: %v", call.Input)
	}
	if _, err := c.CoreV1().Pods(provNS).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("finished pod not deleted: %v", err)
	}
}

func TestPodLauncherOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  corev1.PodStatus
		state   controller.ProvisioningState
		want    string
		unknown bool
		notSupp bool
	}{
		{name: "exit code", status: terminatedStatus(corev1.PodFailed, 2, "boom"), state: controller.ProvisioningFinished,
			want: "provision pod sys/flex-provision-pvc-123 failed with exit code 2: boom"},
		{name: "failure JSON", status: terminatedStatus(corev1.PodFailed, 1, `{"status": "Failure", "message": "full"}`), state: controller.ProvisioningFinished,
			want: "failed with exit code 1: Failure: full"},
		{name: "not supported", status: terminatedStatus(corev1.PodFailed, 1, `{"status": "Not supported"}`), state: controller.ProvisioningFinished,
			want: "Not supported", notSupp: true},
		{name: "deadline", status: func() corev1.PodStatus {
			s := terminatedStatus(corev1.PodFailed, 137, "")
			s.Reason = "DeadlineExceeded"
			return s
		}(), state: controller.ProvisioningInBackground, want: "exceeded its deadline of 120s"},
		// What a real kubelet reports for an image it cannot pull: the pod
		// fails at its deadline, image pull included, with the container
		// still waiting. Nothing ran, so nothing is left to wait for.
		{name: "deadline before the container started", status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded",
			ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: `Back-off pulling image "img": ErrImagePull: not found`}}}}},
			state: controller.ProvisioningFinished,
			want:  `did not start within its deadline of 120s (active-deadline-seconds, which includes pulling the image): on node node-1, container is waiting: ImagePullBackOff Back-off pulling image "img"`},
		{name: "no terminated state", status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on disk"}, state: controller.ProvisioningFinished,
			want: "failed: Evicted low on disk"},
		{name: "garbage", status: terminatedStatus(corev1.PodSucceeded, 0, "done!"), state: controller.ProvisioningFinished, want: "invalid JSON", unknown: true},
		{name: "nothing", status: terminatedStatus(corev1.PodSucceeded, 0, ""), state: controller.ProvisioningFinished,
			want: "neither created PersistentVolume pvc-123 nor wrote a volume", unknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(configMap("gold", classLabels, map[string]string{ConfigImage: "img"}))
			podruntest.Kubelet(t.Context(), t, c, provNS, func(p *corev1.Pod) corev1.PodStatus {
				p.Spec.NodeName = "node-1" // as scheduled
				return tc.status
			})
			_, state, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), provisionCall(t, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if state != tc.state || isUnknownOutcome(err) != tc.unknown || errors.Is(err, ErrNotSupported) != tc.notSupp {
				t.Errorf("state %s, unknown %v, not supported %v", state, isUnknownOutcome(err), errors.Is(err, ErrNotSupported))
			}
		})
	}
}

func TestPodLauncherAdoptsThePodsPV(t *testing.T) {
	call := provisionCall(t, nil)
	claim := call.Options.PVC
	pv := func(_, class string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-123", ResourceVersion: "5", Annotations: map[string]string{"made-by": "pod"}},
			Spec: corev1.PersistentVolumeSpec{StorageClassName: class,
				ClaimRef: &corev1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}},
		}
	}
	good := pv(string(claim.UID), "gold")
	c := newClient(configMap("gold", classLabels, map[string]string{ConfigImage: "img"}), good)
	podruntest.Kubelet(t.Context(), t, c, provNS, func(*corev1.Pod) corev1.PodStatus { return terminatedStatus(corev1.PodSucceeded, 0, "") })
	res, _, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	v := res.Volume
	if v == nil || v.ResourceVersion != "" || v.Annotations["made-by"] != "pod" || v.Annotations[AnnIdentity] != "me" || v.Annotations[AnnPod] == "" || v.Annotations[AnnInput] == "" {
		t.Fatalf("adopted = %+v", v)
	}
	saved, _ := c.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-123", metav1.GetOptions{})
	if saved.Annotations[AnnIdentity] != "me" {
		t.Errorf("the PV on the server is not annotated: %v", saved.Annotations)
	}

	wrongClass := pv(string(claim.UID), "silver")
	c = newClient(configMap("gold", classLabels, map[string]string{ConfigImage: "img"}), wrongClass)
	podruntest.Kubelet(t.Context(), t, c, provNS, func(*corev1.Pod) corev1.PodStatus { return terminatedStatus(corev1.PodSucceeded, 0, "") })
	if _, _, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), provisionCall(t, nil)); err == nil || !strings.Contains(err.Error(), `storageClassName "silver" instead of "gold"`) {
		t.Errorf("wrong class: %v", err)
	}
}

var testRecordKey = []byte("0123456789abcdef0123456789abcdef")

// wantedPod is the pod the launcher creates for a provision call with the
// ConfigMap data.
func wantedPod(t *testing.T, data map[string]string) *corev1.Pod {
	t.Helper()
	l := &PodLauncher{Namespace: provNS, RecordKey: testRecordKey}
	cfg, props, err := ParseConfigMap(configMap("gold", classLabels, data), provNS, int64(l.deadline().Seconds()))
	if err != nil {
		t.Fatal(err)
	}
	call := provisionCall(t, nil)
	for k, v := range props {
		call.Input[k] = v
	}
	pod, err := l.pod(ActionProvision, call, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// An existing pod of the operation is waited on, never duplicated.
func TestPodLauncherUsesExistingPod(t *testing.T) {
	data := map[string]string{ConfigImage: "img"}
	existing := wantedPod(t, data)
	existing.Status = terminatedStatus(corev1.PodSucceeded, 0, `{"status": "Success", "volume": {"nfs": {"server": "nfs.example.com", "path": "/a"}}}`)
	c := newClient(configMap("gold", classLabels, data), existing)
	res, _, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), provisionCall(t, nil))
	if err != nil || res.Output == nil {
		t.Fatalf("res %+v, err %v", res, err)
	}
	creates := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			creates++
		}
	}
	if creates != 1 { // the attempt that found it
		t.Errorf("%d pod creates", creates)
	}
}

// A pod of the right name that this provisioner did not create is never
// used: a tenant who can create pods in that namespace must not decide what
// the PV is (here: the node's root directory).
func TestPodLauncherRefusesPlantedPods(t *testing.T) {
	data := map[string]string{ConfigImage: "img"}
	answer := terminatedStatus(corev1.PodSucceeded, 0, `{"status": "Success", "volume": {"hostPath": {"path": "/"}}}`)
	for name, plant := range map[string]func(*corev1.Pod){
		"other labels":  func(p *corev1.Pod) { p.Labels = nil },
		"other image":   func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil" },
		"other command": func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sh", "-c", "echo planted"} },
		"extra volume": func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		},
		"other securityContext": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil },
		"second container":      func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) },
		"other env":             func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "delete" },
		"a postStart hook": func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh"}}}}
		},
		"not signed": func(p *corev1.Pod) { p.Annotations = nil },
		"signed for another pod": func(p *corev1.Pod) {
			other := wantedPod(t, map[string]string{ConfigImage: "img", "extra": "x"})
			p.Annotations = other.Annotations
		},
	} {
		t.Run(name, func(t *testing.T) {
			planted := wantedPod(t, data)
			plant(planted)
			planted.Status = answer
			c := newClient(configMap("gold", classLabels, data), planted)
			res, _, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), provisionCall(t, nil))
			if err == nil || !strings.Contains(err.Error(), "is not the provision pod this provisioner creates (its ") || !strings.Contains(err.Error(), " differs)") {
				t.Fatalf("planted pod used, or the error does not name what differs: res %+v, err %v", res, err)
			}
			if _, err := c.CoreV1().Pods(provNS).Get(t.Context(), planted.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("a pod the provisioner did not create was deleted: %v", err)
			}
		})
	}
}

// A pod edited while it runs (here: its image) is not the pod this
// provisioner created: its answer is not used, the outcome is unknown (the
// driver may have started), and the pod is deleted.
func TestPodLauncherRefusesPodChangedWhileRunning(t *testing.T) {
	data := map[string]string{ConfigImage: "img"}
	c := newClient(configMap("gold", classLabels, data))
	podruntest.Kubelet(t.Context(), t, c, provNS, func(p *corev1.Pod) corev1.PodStatus {
		p.Spec.Containers[0].Image = "evil" // kept by the fake's status update, as an edit would
		return terminatedStatus(corev1.PodSucceeded, 0, `{"status": "Success", "volume": {"nfs": {"server": "evil.example.com", "path": "/"}}}`)
	})
	res, _, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), provisionCall(t, nil))
	if err == nil || !isUnknownOutcome(err) || !strings.Contains(err.Error(), "was changed after it was created (its spec.containers[0].image differs") {
		t.Fatalf("changed pod used: res %+v, err %v", res, err)
	}
	pods, err := c.CoreV1().Pods(provNS).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("the changed pod was not deleted: %v, %v", pods, err)
	}
}

// A pod's answer may name a node directory only inside the ConfigMap's host-path.
func TestPodLauncherConfinesNodePaths(t *testing.T) {
	for _, tc := range []struct {
		hostPath, answer, wantErr string
	}{
		{"/srv/volumes", `{"hostPath": {"path": "/srv/volumes/pvc-123"}}`, ""},
		{"/srv/volumes", `{"local": {"path": "/srv/volumes/a/b"}}`, ""},
		{"/srv/volumes", `{"hostPath": {"path": "/"}}`, `node path "/", which is not inside "/srv/volumes"`},
		{"/srv/volumes", `{"hostPath": {"path": "/srv/volumes/../../etc"}}`, "which is not inside"},
		{"/srv/volumes", `{"hostPath": {"path": "/srv/volumes-other/x"}}`, "which is not inside"},
		{"/srv/volumes", `{"hostPath": {"path": "/srv/volumes"}}`, "which is not inside"},
		{"", `{"hostPath": {"path": "/data"}}`, `its ConfigMap sets no "host-path"`},
		{"", `{"nfs": {"server": "s", "path": "/data"}}`, ""},
	} {
		data := map[string]string{ConfigImage: "img"}
		if tc.hostPath != "" {
			data[ConfigHostPath] = tc.hostPath
		}
		c := newClient(configMap("gold", classLabels, data))
		podruntest.Kubelet(t.Context(), t, c, provNS, func(*corev1.Pod) corev1.PodStatus {
			return terminatedStatus(corev1.PodSucceeded, 0, `{"status": "Success", "volume": `+tc.answer+`}`)
		})
		_, _, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Provision(t.Context(), provisionCall(t, nil))
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("host-path %q, answer %s: err %v, want %q", tc.hostPath, tc.answer, err, tc.wantErr)
		}
		if tc.wantErr != "" && !isUnknownOutcome(err) {
			t.Errorf("answer %s: a refused answer of a pod that succeeded must be undone (unknown outcome): %v", tc.answer, err)
		}
	}
}

// The pod configuration recorded on a PV runs a delete pod only when it is
// signed with the provisioner's key and valid as a ConfigMap.
func TestPodLauncherDeleteRunsOnlySignedRecords(t *testing.T) {
	record := func(cfg PodConfig, key []byte) map[string]string {
		b, _ := json.Marshal(cfg)
		return map[string]string{AnnPod: string(b), AnnPodSignature: signRecord(key, "pvc-123", string(b))}
	}
	good := PodConfig{ConfigMap: "sys/gold", Image: "img", Namespace: provNS, ActiveDeadlineSeconds: 60}
	evil := good
	evil.Image, evil.HostPath, evil.ServiceAccountName = "evil", "/etc", "cluster-admin"
	copied := record(good, testRecordKey)
	copied[AnnPodSignature] = signRecord(testRecordKey, "pvc-other", copied[AnnPod])
	invalid := good
	invalid.HostPath = "/srv/../etc"
	for name, tc := range map[string]struct {
		ann     map[string]string
		wantErr string
	}{
		"edited record": {func() map[string]string {
			r := record(good, testRecordKey)
			r[AnnPod] = record(evil, nil)[AnnPod]
			return r
		}(), "does not match its signature"},
		"signed with other key": {record(evil, []byte("another key of at least 32 bytes!")), "does not match its signature"},
		"no signature":          {map[string]string{AnnPod: record(evil, nil)[AnnPod]}, "annotation flex.kubeprov.io/pod-signature is missing"},
		"copied from other PV":  {copied, "does not match its signature"},
		"invalid but signed":    {record(invalid, testRecordKey), `key "host-path"`},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient()
			err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}).Delete(t.Context(), &Call{PVName: "pvc-123", Input: Input{}, Record: tc.ann})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			for _, a := range c.Actions() {
				if a.GetVerb() == "create" {
					t.Fatalf("a delete pod was created from an untrusted record: %+v", a)
				}
			}
		})
	}
}

// A pod that never ran is given up and deleted; a running one is left.
func TestPodLauncherGivesUpOnPodsThatNeverStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		state  controller.ProvisioningState
		want   string
		kept   bool
	}{
		{name: "unschedulable", status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}},
			state: controller.ProvisioningFinished, want: "did not start within 1ms (--pod-start-timeout): not scheduled: Unschedulable 0/3 nodes are available"},
		{name: "running", status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
			state: controller.ProvisioningInBackground, want: "still running past its deadline", kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(configMap("gold", classLabels, map[string]string{ConfigImage: "img", ConfigActiveDeadline: "1"}))
			// The status is there from the start, so the launcher's look at the
			// pod after its bound cannot race a kubelet.
			c.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				action.(k8stesting.CreateAction).GetObject().(*corev1.Pod).Status = tc.status
				return false, nil, nil
			})
			// The fake server sets no creationTimestamp: the bound has passed at once.
			_, state, err := (&PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey, StartTimeout: time.Millisecond}).Provision(t.Context(), provisionCall(t, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || state != tc.state {
				t.Fatalf("state %s, err %v", state, err)
			}
			_, gerr := c.CoreV1().Pods(provNS).Get(t.Context(), "flex-provision-pvc-123", metav1.GetOptions{})
			if kept := gerr == nil; kept != tc.kept {
				t.Errorf("pod kept = %v, want %v", kept, tc.kept)
			}
		})
	}
}

func TestPodLauncherDelete(t *testing.T) {
	c := newClient()
	seen := podruntest.Kubelet(t.Context(), t, c, "work", func(*corev1.Pod) corev1.PodStatus { return terminatedStatus(corev1.PodSucceeded, 0, "") })
	l := &PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-123", UID: "pv-uid"}}
	cfg := `{"configMap": "sys/gold", "image": "img", "namespace": "work", "activeDeadlineSeconds": 60}`
	record := map[string]string{AnnPod: cfg, AnnPodSignature: signRecord(testRecordKey, pv.Name, cfg)}
	err := l.Delete(t.Context(), &Call{PVName: pv.Name, Input: Input{KeyPVName: pv.Name}, Record: record, Volume: pv})
	if err != nil {
		t.Fatal(err)
	}
	pod := <-seen
	if pod.Name != "flex-delete-pvc-123" || pod.Spec.Containers[0].Env[0].Value != ActionDelete {
		t.Errorf("delete pod %s env %v", pod.Name, pod.Spec.Containers[0].Env)
	}
	if o := pod.OwnerReferences; len(o) != 1 || o[0].Kind != "PersistentVolume" || o[0].UID != "pv-uid" {
		t.Errorf("owners = %v", o)
	}
	// Records written before pods had a securityContext run restricted.
	if sc := pod.Spec.Containers[0].SecurityContext; sc == nil || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation {
		t.Errorf("delete pod securityContext = %+v, want the restricted default", sc)
	}
	if err := l.Delete(t.Context(), &Call{PVName: "x", Input: Input{}, Record: map[string]string{}}); err == nil || !strings.Contains(err.Error(), "annotation "+AnnPodSignature+" is missing") {
		t.Errorf("no record: %v", err)
	}
}

func TestFindConfigMap(t *testing.T) {
	class := testOptions("1Gi", nil).StorageClass
	l := func(objs ...*corev1.ConfigMap) *PodLauncher {
		c := fake.NewClientset()
		for _, o := range objs {
			_, _ = c.CoreV1().ConfigMaps(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		}
		return &PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey}
	}
	if _, err := l().findConfigMap(t.Context(), class); err == nil || !strings.Contains(err.Error(), "has no provisioner ConfigMap") || !strings.Contains(err.Error(), "storage-class=gold,type=provisioner-config") {
		t.Errorf("none: %v", err)
	}
	if _, err := l(configMap("a", classLabels, nil), configMap("b", classLabels, nil)).findConfigMap(t.Context(), class); err == nil || !strings.Contains(err.Error(), "has 2 provisioner ConfigMaps in namespace sys (a, b)") {
		t.Errorf("two: %v", err)
	}
	other := configMap("x", nil, nil)
	other.Namespace = "elsewhere"
	byParam := class.DeepCopy()
	byParam.Parameters = map[string]string{ParamProvisionerConfig: "elsewhere/x"}
	// Another namespace's ConfigMap only where an administrator allowed it.
	if _, err := l(other).findConfigMap(t.Context(), byParam); err == nil ||
		!strings.Contains(err.Error(), "names ConfigMap elsewhere/x outside the provisioner's namespace sys") || !strings.Contains(err.Error(), "--allow-config-namespaces=elsewhere") {
		t.Errorf("by parameter, another namespace: %v", err)
	}
	allowing := l(other)
	allowing.AllowConfigNamespaces = []string{"elsewhere"}
	if cm, err := allowing.findConfigMap(t.Context(), byParam); err != nil || cm.Name != "x" {
		t.Errorf("by parameter, an allowed namespace: %v, %v", cm, err)
	}
	own := configMap("x", nil, nil)
	byParam.Parameters[ParamProvisionerConfig] = provNS + "/x"
	if cm, err := l(own).findConfigMap(t.Context(), byParam); err != nil || cm.Name != "x" {
		t.Errorf("by parameter, the provisioner's namespace named: %v, %v", cm, err)
	}
	byParam.Parameters[ParamProvisionerConfig] = "missing"
	if _, err := l(other).findConfigMap(t.Context(), byParam); err == nil || !strings.Contains(err.Error(), "sys/missing (parameter provisionerConfig) not found") {
		t.Errorf("missing: %v", err)
	}
}

func TestPodName(t *testing.T) {
	if n := PodName(ActionProvision, "pvc-0f4c7a62-4e3c-4b5e-9a3e-2f6d1c7b8a90"); n != "flex-provision-pvc-0f4c7a62-4e3c-4b5e-9a3e-2f6d1c7b8a90" {
		t.Errorf("short name changed: %s", n)
	}
	long := strings.Repeat("a", 80)
	a, b := PodName(ActionDelete, long+"1"), PodName(ActionDelete, long+"2")
	if len(a) > 63 || a == b || a != PodName(ActionDelete, long+"1") {
		t.Errorf("capped names %q %q", a, b)
	}
}
