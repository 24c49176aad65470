// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/podrun"
)

const fullTemplate = `
spec:
  priorityClassName: storage-critical
  tolerations:
  - key: dedicated
    operator: Equal
    value: storage
    effect: NoSchedule
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [west]}
  securityContext:
    runAsUser: 1000
    fsGroup: 2000
  imagePullSecrets:
  - name: registry-creds
  nodeSelector:
    tier: storage
  containers:
  - name: driver
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {memory: 128Mi}
    securityContext:
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL], add: [DAC_OVERRIDE]}
`

// A template adds its fields to the pods; the provisioner's own stay.
func TestPodTemplateMerge(t *testing.T) {
	data := map[string]string{ConfigImage: "img", ConfigNodeSelector: "disk=ssd", ConfigHostPath: "/srv/v", ConfigPodTemplate: fullTemplate}
	pod := wantedPod(t, data)
	spec := pod.Spec
	if spec.PriorityClassName != "storage-critical" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Value != "storage" ||
		spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "registry-creds" {
		t.Errorf("template fields missing from the pod: %+v", spec)
	}
	if sc := spec.SecurityContext; sc == nil || *sc.RunAsUser != 1000 || *sc.FSGroup != 2000 {
		t.Errorf("pod securityContext = %+v", sc)
	}
	if len(spec.NodeSelector) != 2 || spec.NodeSelector["disk"] != "ssd" || spec.NodeSelector["tier"] != "storage" {
		t.Errorf("nodeSelector = %v, want node-selector and the template's", spec.NodeSelector)
	}
	c := spec.Containers[0]
	if !c.Resources.Requests.Cpu().Equal(resource.MustParse("100m")) || !c.Resources.Limits.Memory().Equal(resource.MustParse("128Mi")) {
		t.Errorf("resources = %+v", c.Resources)
	}
	if sc := c.SecurityContext; sc == nil || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "DAC_OVERRIDE" {
		t.Errorf("container securityContext = %+v", sc)
	}
	// The provisioner's own fields.
	if c.Image != "img" || len(c.Command) != 0 || spec.RestartPolicy != corev1.RestartPolicyNever || spec.HostNetwork ||
		len(spec.Volumes) != 1 || spec.Volumes[0].HostPath.Path != "/srv/v" || pod.Labels[LabelManagedBy] != ManagedBy || spec.ServiceAccountName != "" {
		t.Errorf("provisioner's fields changed: %+v", pod)
	}
	// The pod the provisioner would create is its own (an existing one is used).
	if !podrun.SameIntent(pod, wantedPod(t, data)) {
		t.Error("SameIntent refuses the pod built from the same template")
	}
	// Admission adds tolerations: still the same pod.
	admitted := wantedPod(t, data)
	admitted.Spec.Tolerations = append(admitted.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	if !podrun.SameIntent(admitted, pod) {
		t.Error("SameIntent refuses a pod with admission's default tolerations")
	}
	// A pod with another pod securityContext is not.
	other := wantedPod(t, data)
	other.Spec.SecurityContext.RunAsUser = new(int64)
	if podrun.SameIntent(other, pod) {
		t.Error("SameIntent accepts a pod with another pod securityContext")
	}
}

// The template is recorded on the PV with the rest of PodConfig, so it is
// signed, and a delete pod gets exactly it.
func TestPodTemplateRecorded(t *testing.T) {
	cfg, _, err := ParseConfigMap(configMap("gold", classLabels, map[string]string{ConfigImage: "img", ConfigPodTemplate: fullTemplate}), provNS, 60)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := podConfigFrom(map[string]string{AnnPod: string(b)})
	if err != nil {
		t.Fatal(err)
	}
	l := &PodLauncher{Namespace: provNS, RecordKey: testRecordKey}
	call := provisionCall(t, nil)
	want, err := l.pod(ActionDelete, call, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.pod(ActionDelete, call, back, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !podrun.SameIntent(got, want) || !podrun.SameIntent(want, got) || got.Spec.PriorityClassName != "storage-critical" || got.Spec.Containers[0].Resources.Limits.Memory().IsZero() {
		t.Errorf("delete pod from the record differs from the validated one:\n%+v\n%+v", got.Spec, want.Spec)
	}
	// A record whose template was edited no longer matches its signature.
	sig := signRecord(testRecordKey, "pvc-123", string(b))
	edited := strings.Replace(string(b), "storage-critical", "system-node-critical", 1)
	if err := verifyRecord(testRecordKey, "pvc-123", map[string]string{AnnPod: edited, AnnPodSignature: sig}); err == nil {
		t.Error("an edited template verified")
	}
}

// Fields outside the allowed ones are refused by name, with the ConfigMap
// and the key; none reaches a pod.
func TestPodTemplateRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		template string
		extra    map[string]string
		want     []string
	}{
		"hostNetwork": {template: "spec: {hostNetwork: true}", want: []string{"field spec.hostNetwork: not allowed (pods never share the node's namespaces)"}},
		"hostPID":     {template: "spec: {hostPID: true}", want: []string{"field spec.hostPID: not allowed"}},
		"hostPath volume": {template: "spec:\n  volumes:\n  - name: root\n    hostPath: {path: /}\n",
			want: []string{"field spec.volumes: not allowed (the provisioner mounts only"}},
		"privileged": {template: "spec:\n  containers:\n  - securityContext: {privileged: true}\n",
			want: []string{"field spec.containers[0].securityContext.privileged: privileged containers are not allowed"}},
		"command":        {template: "spec:\n  containers:\n  - command: [sh]\n", want: []string{"field spec.containers[0].command: not allowed"}},
		"image":          {template: "spec:\n  containers:\n  - image: evil\n", want: []string{`field spec.containers[0].image: not allowed (use the ConfigMap key "image")`}},
		"volumeMounts":   {template: "spec:\n  containers:\n  - volumeMounts: [{name: x, mountPath: /x}]\n", want: []string{"field spec.containers[0].volumeMounts: not allowed"}},
		"other name":     {template: "spec:\n  containers:\n  - name: sidecar\n", want: []string{`field spec.containers[0].name: must be "driver"`}},
		"two containers": {template: "spec:\n  containers: [{}, {}]\n", want: []string{"field spec.containers: has 2 entries"}},
		"metadata":       {template: "metadata: {labels: {a: b}}\nspec: {}", want: []string{"field metadata: not allowed (labels and annotations"}},
		"serviceAccount": {template: "spec: {serviceAccountName: admin}", want: []string{`field spec.serviceAccountName: not allowed (use the ConfigMap key "service-account-name")`}},
		"unknown field": {template: "spec: {tolerations: [{key: a, operater: Exists}]}",
			want: []string{`field spec.tolerations: json: unknown field "operater"`}},
		"misspelled spec field": {template: "spec: {priorityClass: high}",
			want: []string{"field spec.priorityClass: not allowed (a pod template may set only spec.affinity, spec.containers"}},
		"unknown in securityContext": {template: "spec: {securityContext: {runAsUsr: 1}}",
			want: []string{`field spec.securityContext: json: unknown field "runAsUsr"`}},
		"bad quantity": {template: "spec:\n  containers:\n  - resources: {limits: {memory: lots}}\n",
			want: []string{"field spec.containers[0].resources:"}},
		"request over limit": {template: "spec:\n  containers:\n  - resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n",
			want: []string{"field spec.containers[0].resources.requests.memory: 2Gi is more than its limit 1Gi"}},
		"not yaml":           {template: "spec: [", want: []string{"not YAML"}},
		"not a mapping":      {template: "- a", want: []string{"not a pod template"}},
		"bad priority class": {template: "spec: {priorityClassName: Not_Valid}", want: []string{"field spec.priorityClassName"}},
		"both securityContexts": {template: "spec:\n  containers:\n  - securityContext: {runAsUser: 1}\n",
			extra: map[string]string{ConfigSecurityContext: `{"runAsUser": 2}`},
			want:  []string{`field spec.containers[0].securityContext: key "security-context" sets it too`}},
		"nodeSelector contradicts": {template: "spec: {nodeSelector: {disk: hdd}}", extra: map[string]string{ConfigNodeSelector: "disk=ssd"},
			want: []string{`field spec.nodeSelector: disk=hdd contradicts key "node-selector" (disk=ssd)`}},
		"several at once": {template: "spec: {hostNetwork: true, hostIPC: true, nodeName: n1}",
			want: []string{"spec.hostNetwork", "spec.hostIPC", "spec.nodeName: not allowed (use nodeSelector or affinity)"}},
		"forbidden and privileged": {template: "spec:\n  hostNetwork: true\n  containers:\n  - securityContext: {privileged: true}\n",
			want: []string{"spec.hostNetwork", "spec.containers[0].securityContext.privileged"}},
	} {
		t.Run(name, func(t *testing.T) {
			data := map[string]string{ConfigImage: "img", ConfigPodTemplate: tc.template}
			for k, v := range tc.extra {
				data[k] = v
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "gold"}, Data: data}
			_, _, err := ParseConfigMap(cm, "sys", 60)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append([]string{`provisioner ConfigMap sys/gold is invalid: key "pod-template": `}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// An empty template, or one with only a container name, changes nothing.
func TestPodTemplateEmpty(t *testing.T) {
	for _, tpl := range []string{"spec: {}", "spec:\n  containers:\n  - name: driver\n"} {
		cfg, _, err := ParseConfigMap(configMap("gold", nil, map[string]string{ConfigImage: "img", ConfigPodTemplate: tpl}), provNS, 60)
		if err != nil || cfg.Template != nil || !*cfg.SecurityContext.RunAsNonRoot {
			t.Errorf("%q: %+v, %v", tpl, cfg, err)
		}
	}
}
