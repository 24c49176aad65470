// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// ConfigPodTemplate is the ConfigMap key of a pod template: a YAML fragment
// of a PodTemplateSpec whose few allowed fields (templateSpecFields,
// templateContainerFields) are merged under the pods the provisioner builds.
const ConfigPodTemplate = "pod-template"

// PodTemplate is what a pod template adds to the pods, in the form recorded
// on a PV (part of PodConfig, and so of what the record signs): a delete pod
// gets exactly what its provision pod was validated with. The template's
// nodeSelector and container securityContext are not here: they are merged
// into PodConfig's.
type PodTemplate struct {
	Tolerations       []corev1.Toleration           `json:"tolerations,omitempty"`
	Affinity          *corev1.Affinity              `json:"affinity,omitempty"`
	PriorityClassName string                        `json:"priorityClassName,omitempty"`
	SecurityContext   *corev1.PodSecurityContext    `json:"securityContext,omitempty"`
	ImagePullSecrets  []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Resources are the driver container's.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// What a pod template may set. Everything else of a pod is the
// provisioner's: command, image, environment, volumes, labels, restart
// policy, service account, host namespaces.
var (
	templateTopFields       = []string{"spec"}
	templateSpecFields      = []string{"affinity", "containers", "imagePullSecrets", "nodeSelector", "priorityClassName", "securityContext", "tolerations"}
	templateContainerFields = []string{"name", "resources", "securityContext"}
	// Why some fields people try are refused, beyond "not allowed".
	templateRefusals = map[string]string{
		"metadata":                        "labels and annotations of the pods are the provisioner's",
		"spec.volumes":                    "the provisioner mounts only the ConfigMap's host-path and the class's secret",
		"spec.hostNetwork":                "pods never share the node's namespaces",
		"spec.hostPID":                    "pods never share the node's namespaces",
		"spec.hostIPC":                    "pods never share the node's namespaces",
		"spec.serviceAccountName":         useKey(ConfigServiceAccountName),
		"spec.nodeName":                   "use nodeSelector or affinity",
		"spec.initContainers":             "the pod runs the driver container only",
		"spec.restartPolicy":              "pods never restart: a driver runs once per attempt",
		"spec.activeDeadlineSeconds":      useKey(ConfigActiveDeadline),
		"spec.containers[0].image":        useKey(ConfigImage),
		"spec.containers[0].command":      "the image's entrypoint runs",
		"spec.containers[0].args":         "the image's entrypoint runs",
		"spec.containers[0].env":          "the environment is the driver's input",
		"spec.containers[0].volumeMounts": "the provisioner mounts only the ConfigMap's host-path and the class's secret",
	}
)

// parsePodTemplate reads a pod template strictly: every field outside the
// allowed ones is reported by its path. It returns what the pods get from it,
// and the container securityContext and nodeSelector to merge into cfg.
func parsePodTemplate(s string) (*PodTemplate, *corev1.SecurityContext, map[string]string, error) {
	spec, errs, err := templateSpec(s)
	if err != nil {
		return nil, nil, nil, err
	}
	tpl := &PodTemplate{}
	ctrSC, ctrErrs := tpl.readContainer(spec["containers"])
	errs = append(errs, ctrErrs...)
	for _, f := range templatePodFields {
		if v := spec[f.name]; v != nil {
			errs = append(errs, strictField("spec."+f.name, v, f.into(tpl)))
		}
	}
	var sel map[string]string
	if v := spec["nodeSelector"]; v != nil {
		errs = append(errs, strictField("spec.nodeSelector", v, &sel))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, nil, err
	}
	if tpl.isZero() {
		tpl = nil
	}
	return tpl, ctrSC, sel, nil
}

// templateSpec decodes a template's top level and its spec, naming every
// field outside the allowed ones in errs; err is for a template that is no
// mapping at all.
func templateSpec(s string) (spec map[string]json.RawMessage, errs []error, err error) {
	raw, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, nil, fmt.Errorf("not YAML: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, nil, errors.New("not a pod template: expected a mapping with spec:, for example spec: {tolerations: [...]}")
	}
	errs = append(errs, unknownFields("", top, templateTopFields)...)
	if top["spec"] != nil {
		if err := json.Unmarshal(top["spec"], &spec); err != nil {
			errs = append(errs, fmt.Errorf("field spec: not a mapping"))
		}
	}
	errs = append(errs, unknownFields("spec.", spec, templateSpecFields)...)
	return spec, errs, nil
}

// templatePodFields are the pod-level fields of a template that go to a
// PodTemplate as they are, in the order their problems are reported; into
// returns where a field is decoded to (allocating it: an absent field
// stays nil).
var templatePodFields = []struct {
	name string
	into func(t *PodTemplate) any
}{
	{"tolerations", func(t *PodTemplate) any { return &t.Tolerations }},
	{"affinity", func(t *PodTemplate) any { t.Affinity = &corev1.Affinity{}; return t.Affinity }},
	{"priorityClassName", func(t *PodTemplate) any { return &t.PriorityClassName }},
	{"securityContext", func(t *PodTemplate) any { t.SecurityContext = &corev1.PodSecurityContext{}; return t.SecurityContext }},
	{"imagePullSecrets", func(t *PodTemplate) any { return &t.ImagePullSecrets }},
}

// readContainer reads spec.containers, which may hold only the driver
// container: its resources go to t, and its securityContext, which is
// merged into PodConfig's, is returned.
func (t *PodTemplate) readContainer(raw json.RawMessage) (*corev1.SecurityContext, []error) {
	if raw == nil {
		return nil, nil
	}
	var ctrs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ctrs); err != nil {
		return nil, []error{errors.New("field spec.containers: not a list of containers")}
	}
	if len(ctrs) != 1 {
		return nil, []error{fmt.Errorf("field spec.containers: has %d entries: give one, the driver container (name %q, or no name)", len(ctrs), ContainerName)}
	}
	ctr := ctrs[0]
	errs := unknownFields("spec.containers[0].", ctr, templateContainerFields)
	if n := ctr["name"]; n != nil {
		var name string
		if json.Unmarshal(n, &name) != nil || name != ContainerName {
			errs = append(errs, fmt.Errorf("field spec.containers[0].name: must be %q (the driver container) or left out", ContainerName))
		}
	}
	if r := ctr["resources"]; r != nil {
		t.Resources = &corev1.ResourceRequirements{}
		errs = append(errs, strictField("spec.containers[0].resources", r, t.Resources))
	}
	var sc *corev1.SecurityContext
	if v := ctr["securityContext"]; v != nil {
		sc = &corev1.SecurityContext{}
		errs = append(errs, strictField("spec.containers[0].securityContext", v, sc))
		if privileged(sc) {
			errs = append(errs, errors.New("field spec.containers[0].securityContext.privileged: privileged containers are not allowed: add only the capabilities the driver needs"))
		}
	}
	return sc, errs
}

// unknownFields names each key of m outside allowed, with the reason when it
// is one people try.
func unknownFields(prefix string, m map[string]json.RawMessage, allowed []string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(allowed, k) {
			continue
		}
		p := prefix + k
		why := templateRefusals[p]
		if why == "" {
			why = "a pod template may set only " + strings.Join(prefixed(prefix, allowed), ", ")
		}
		errs = append(errs, fmt.Errorf("field %s: not allowed (%s)", p, why))
	}
	return errs
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// strictField decodes one field, refusing fields its type does not have.
func strictField(path string, raw json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("field %s: %w", path, err)
	}
	return nil
}

func (t *PodTemplate) isZero() bool {
	return len(t.Tolerations) == 0 && t.Affinity == nil && t.PriorityClassName == "" && t.SecurityContext == nil &&
		len(t.ImagePullSecrets) == 0 && t.Resources == nil
}

// check validates what the API server would not, or would only report
// without naming the ConfigMap: names. Field paths are the template's.
func (t *PodTemplate) check() []error {
	if t == nil {
		return nil
	}
	var errs templateErrors
	if t.PriorityClassName != "" {
		if msgs := validation.IsDNS1123Subdomain(t.PriorityClassName); len(msgs) > 0 {
			errs.add("spec.priorityClassName", "%q is not a valid PriorityClass name: %s", t.PriorityClassName, strings.Join(msgs, "; "))
		}
	}
	for i, s := range t.ImagePullSecrets {
		if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
			errs.add(fmt.Sprintf("spec.imagePullSecrets[%d].name", i), "%q is not a valid Secret name: %s", s.Name, strings.Join(msgs, "; "))
		}
	}
	t.checkTolerations(&errs)
	t.checkResources(&errs)
	return errs
}

// checkTolerations: a value only with operator Equal, and taint keys that
// are qualified names.
func (t *PodTemplate) checkTolerations(errs *templateErrors) {
	for i, tol := range t.Tolerations {
		if tol.Operator == corev1.TolerationOpExists && tol.Value != "" {
			errs.add(fmt.Sprintf("spec.tolerations[%d].value", i), "must be empty with operator Exists")
		}
		if tol.Key == "" {
			continue
		}
		if msgs := validation.IsQualifiedName(tol.Key); len(msgs) > 0 {
			errs.add(fmt.Sprintf("spec.tolerations[%d].key", i), "%q is not a valid taint key: %s", tol.Key, strings.Join(msgs, "; "))
		}
	}
}

// checkResources: no resource claims, and no request above its limit.
func (t *PodTemplate) checkResources(errs *templateErrors) {
	r := t.Resources
	if r == nil {
		return
	}
	if len(r.Claims) > 0 {
		errs.add("spec.containers[0].resources.claims", "not allowed: the pods have no resource claims")
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs.add("spec.containers[0].resources.requests."+string(name), "%s is more than its limit %s", req.String(), lim.String())
		}
	}
}

// templateErrors collects the problems of a pod template, each naming the
// ConfigMap key and the template's field.
type templateErrors []error

func (e *templateErrors) add(field, format string, args ...any) {
	*e = append(*e, fmt.Errorf("key %q: field %s: %s", ConfigPodTemplate, field, fmt.Sprintf(format, args...)))
}

// apply sets the template's fields on a pod the provisioner built; nothing
// the provisioner set is replaced (the pod has none of these fields).
func (t *PodTemplate) apply(pod *corev1.Pod) {
	if t == nil {
		return
	}
	pod.Spec.Tolerations = t.Tolerations
	pod.Spec.Affinity = t.Affinity
	pod.Spec.PriorityClassName = t.PriorityClassName
	pod.Spec.SecurityContext = t.SecurityContext
	pod.Spec.ImagePullSecrets = t.ImagePullSecrets
	if t.Resources != nil {
		pod.Spec.Containers[0].Resources = *t.Resources
	}
}

func useKey(k string) string { return fmt.Sprintf("use the ConfigMap key %q", k) }
