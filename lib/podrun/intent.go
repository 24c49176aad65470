// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package podrun

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/kubeprov/external-storage/lib/gate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// SameIntent reports whether an existing pod is the one want describes:
// Mismatch finds no difference (the rule gate.AdoptPod).
func SameIntent(existing, want *corev1.Pod) bool {
	return gate.AdoptPod(Mismatch(existing, want)) == nil
}

// Mismatch names the first part of existing that is not what want
// describes, or returns "" when there is none. The whole pod is compared:
// want's labels and annotations (existing may have more), its owners, and
// its entire spec, each field equal but for what the API server and a
// default cluster set on a pod without changing what it runs:
//
//   - the API server's defaults, for fields want leaves empty (DNS and
//     restart policy, scheduler, grace period, image pull policy,
//     termination message path and policy, requests from limits, volume
//     modes, an empty pod securityContext, service links);
//   - the ServiceAccount admission's "default" account, its pull secrets
//     for a pod that names none, and its token volume and mounts for a pod
//     that does not refuse a token (in exactly the shape it adds);
//   - the DefaultTolerationSeconds admission's not-ready and unreachable
//     tolerations, the Priority admission's priority, preemption policy
//     and default class, LimitRanger's requests and limits of resources
//     want does not name, and the node the scheduler picked when want
//     names none.
//
// Anything else a pod has and want does not (a command, a lifecycle hook,
// a probe, host aliases, DNS settings, a runtime class, a shared process
// namespace, another container) is a mismatch: whoever can create pods
// in the namespace can plant one, and it must not pass for ours. The
// answer names a field, never its value (values may be secret).
func Mismatch(existing, want *corev1.Pod) string {
	for _, k := range slices.Sorted(maps.Keys(want.Labels)) {
		if v, ok := existing.Labels[k]; !ok || v != want.Labels[k] {
			return "label " + k
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.Annotations)) {
		if v, ok := existing.Annotations[k]; !ok || v != want.Annotations[k] {
			return "annotation " + k
		}
	}
	if !equality.Semantic.DeepEqual(existing.OwnerReferences, want.OwnerReferences) {
		return "metadata.ownerReferences"
	}
	w := defaulted(want.Spec)
	e := admitted(defaulted(existing.Spec), w)
	return difference("spec", reflect.ValueOf(e), reflect.ValueOf(w))
}

// defaulted is spec with the API server's defaults for a pod (those of the
// fields operation pods use) applied, as it stores it.
func defaulted(spec corev1.PodSpec) corev1.PodSpec {
	s := *spec.DeepCopy()
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	// The ServiceAccount admission names the account of a pod that names
	// none; the v1 API mirrors it in the deprecated field.
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = "default"
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i].VolumeSource)
	}
	return s
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil && from.FieldRef != nil && from.FieldRef.APIVersion == "" {
			from.FieldRef.APIVersion = "v1"
		}
	}
}

// defaultPullPolicy is the API server's: Always for the tag "latest" or
// no tag at all, IfNotPresent for any other tag or a digest.
func defaultPullPolicy(image string) corev1.PullPolicy {
	name, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	if tag == "latest" || (tag == "" && digest == "") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// defaultVolume applies the API server's defaults to a volume source: an
// empty one is an emptyDir, and each kind gets its default mode or type.
func defaultVolume(v *corev1.VolumeSource) {
	if ptr.AllPtrFieldsNil(v) {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if v.Secret != nil && v.Secret.DefaultMode == nil {
		v.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	if v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil {
		v.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if v.DownwardAPI != nil {
		defaultDownwardAPI(v.DownwardAPI)
	}
	if v.Projected != nil {
		defaultProjected(v.Projected)
	}
}

// defaultDownwardAPI applies the API server's defaults to a downwardAPI
// volume: its mode and its field references' API version.
func defaultDownwardAPI(d *corev1.DownwardAPIVolumeSource) {
	if d.DefaultMode == nil {
		d.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
	}
	defaultFieldRefs(d.Items)
}

// defaultProjected applies the API server's defaults to a projected volume:
// its mode, its tokens' expiry and its field references' API version.
func defaultProjected(p *corev1.ProjectedVolumeSource) {
	if p.DefaultMode == nil {
		p.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
	}
	for _, src := range p.Sources {
		if t := src.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
			t.ExpirationSeconds = ptr.To[int64](3600)
		}
		if src.DownwardAPI != nil {
			defaultFieldRefs(src.DownwardAPI.Items)
		}
	}
}

func defaultFieldRefs(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// admitted is existing (defaulted, a copy it changes) without what
// admission plugins and the scheduler add to a pod created from want
// (defaulted), so that the rest can be compared field by field.
func admitted(e, want corev1.PodSpec) corev1.PodSpec {
	if want.NodeName == "" {
		e.NodeName = ""
	}
	// Priority admission: derived from the class, which it may default.
	if want.Priority == nil {
		e.Priority = nil
	}
	if want.PreemptionPolicy == nil {
		e.PreemptionPolicy = nil
	}
	if want.PriorityClassName == "" {
		e.PriorityClassName = ""
	}
	// ServiceAccount admission: the account's pull secrets, for a pod
	// naming none.
	if len(want.ImagePullSecrets) == 0 {
		e.ImagePullSecrets = nil
	}
	e.Tolerations = slices.DeleteFunc(e.Tolerations, func(t corev1.Toleration) bool {
		return isDefaultToleration(t) && !slices.ContainsFunc(want.Tolerations, func(w corev1.Toleration) bool { return equality.Semantic.DeepEqual(w, t) })
	})
	if ptr.Deref(want.AutomountServiceAccountToken, true) {
		e.Volumes, e.InitContainers, e.Containers = withoutToken(e.Volumes, e.InitContainers, e.Containers)
	}
	// LimitRanger: requests and limits of resources want does not name.
	for i := range min(len(e.Containers), len(want.Containers)) {
		e.Containers[i].Resources.Limits = onlyNamed(e.Containers[i].Resources.Limits, want.Containers[i].Resources.Limits)
		e.Containers[i].Resources.Requests = onlyNamed(e.Containers[i].Resources.Requests, want.Containers[i].Resources.Requests)
	}
	return e
}

// isDefaultToleration: the DefaultTolerationSeconds admission's toleration
// of a node that is not ready or unreachable, for some seconds.
func isDefaultToleration(t corev1.Toleration) bool {
	return (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) &&
		t.Operator == corev1.TolerationOpExists && t.Effect == corev1.TaintEffectNoExecute && t.Value == ""
}

// onlyNamed is have's quantities of the resources that want names.
func onlyNamed(have, want corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range have {
		if _, ok := want[name]; ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// What the ServiceAccount admission adds to a pod that mounts a token.
const (
	tokenVolumePrefix = "kube-api-access-"
	tokenMountPath    = "/var/run/secrets/kubernetes.io/serviceaccount" //nolint:gosec // G101: a path, not a credential
	// tokenExpirationSeconds is the admission's (a little over the hour
	// after which a token is merely reported as stale).
	tokenExpirationSeconds = 3607
)

// tokenVolumeSource is the projected volume the ServiceAccount admission
// adds, exactly: any other projection would be the planter's.
func tokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}
}

// withoutToken removes the ServiceAccount admission's token volume and the
// read-only mount of it that it gives each container.
func withoutToken(volumes []corev1.Volume, inits, containers []corev1.Container) ([]corev1.Volume, []corev1.Container, []corev1.Container) {
	token := tokenVolumeSource()
	i := slices.IndexFunc(volumes, func(v corev1.Volume) bool {
		return strings.HasPrefix(v.Name, tokenVolumePrefix) && equality.Semantic.DeepEqual(v.Projected, token)
	})
	if i < 0 {
		return volumes, inits, containers
	}
	mount := corev1.VolumeMount{Name: volumes[i].Name, ReadOnly: true, MountPath: tokenMountPath}
	for _, cs := range [][]corev1.Container{inits, containers} {
		for j := range cs {
			cs[j].VolumeMounts = slices.DeleteFunc(cs[j].VolumeMounts, func(m corev1.VolumeMount) bool { return equality.Semantic.DeepEqual(m, mount) })
		}
	}
	return slices.Delete(volumes, i, i+1), inits, containers
}

// difference names, by its JSON path under path, the first field in which
// a and b (values of one API type) differ, or "" when they do not.
func difference(path string, a, b reflect.Value) string {
	if equality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return ""
	}
	switch {
	case a.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil():
		return difference(path, a.Elem(), b.Elem())
	case a.Kind() == reflect.Slice && a.Len() == b.Len():
		if d := elementDifference(path, a, b); d != "" {
			return d
		}
	case a.Kind() == reflect.Struct && a.Type().PkgPath() == reflect.TypeFor[corev1.PodSpec]().PkgPath():
		if d := fieldDifference(path, a, b); d != "" {
			return d
		}
	}
	return path
}

// elementDifference is difference for the first element in which slices a
// and b, of one length, differ.
func elementDifference(path string, a, b reflect.Value) string {
	for i := range a.Len() {
		if d := difference(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
			return d
		}
	}
	return ""
}

// fieldDifference is difference for the first exported field in which
// structs a and b differ, named by its JSON name (an inlined one adds
// none).
func fieldDifference(path string, a, b reflect.Value) string {
	for i := range a.NumField() {
		f := a.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := path + "." + name
		if name == "" { // inlined
			p = path
		}
		if d := difference(p, a.Field(i), b.Field(i)); d != "" {
			return d
		}
	}
	return ""
}
