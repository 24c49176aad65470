// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// Keys of a provisioner ConfigMap (container launcher). Every other key is an
// extra property passed to the pod, like a class parameter.
const (
	ConfigImage              = "image"
	ConfigServiceAccountName = "service-account-name"
	ConfigNodeSelector       = "node-selector"
	ConfigNamespace          = "namespace"
	ConfigActiveDeadline     = "active-deadline-seconds"
	ConfigHostPath           = "host-path"
	// ConfigSecurityContext replaces the pods' container securityContext
	// (JSON); without it they run restricted (DefaultSecurityContext).
	ConfigSecurityContext = "security-context"
	// ConfigPodTemplate (template.go) adds scheduling, resources and
	// security settings to the pods.
)

// StorageClass parameters the container launcher reads.
const (
	// ParamProvisionerConfig names the provisioner ConfigMap: "<namespace>/<name>",
	// or "<name>" in the provisioner's namespace.
	ParamProvisionerConfig = "provisionerConfig"
	// ParamSecretName names a Secret in the pods' namespace, mounted read-only
	// at SecretMountPath.
	ParamSecretName = "secretName"
)

// Labels that find a provisioner ConfigMap without ParamProvisionerConfig:
// storage-class=<class>, type=provisioner-config, in the provisioner's namespace.
const (
	LabelStorageClass     = "storage-class"
	LabelType             = "type"
	TypeProvisionerConfig = "provisioner-config"
)

// AnnPod records on a PV how its pods run (PodConfig as JSON), so that
// delete runs like provision did even if the ConfigMap changed or is gone.
// AnnPodSignature signs it (see PodLauncher.RecordKey): whoever can edit PV
// annotations must not choose what image, service account and node path a
// delete pod gets.
const (
	AnnPod          = "flex.kubeprov.io/pod"
	AnnPodSignature = "flex.kubeprov.io/pod-signature"
)

// AnnPodIntent signs each provisioning and delete pod as the provisioner
// built it (its namespace, name, labels, owners and spec), with the record
// key: a pod without it, or changed since, is not taken for one of ours.
const AnnPodIntent = "flex.kubeprov.io/pod-intent-signature"

// DefaultSecurityContext is the container securityContext of provisioning
// and delete pods unless the ConfigMap sets ConfigSecurityContext: the Pod
// Security Standards' "restricted" profile.
func DefaultSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// PodConfig is how the pods of one StorageClass run: the validated form of a
// provisioner ConfigMap plus the class's secret.
type PodConfig struct {
	// ConfigMap is "<namespace>/<name>" of the source, for messages.
	ConfigMap             string            `json:"configMap"`
	Image                 string            `json:"image"`
	Namespace             string            `json:"namespace"`
	ServiceAccountName    string            `json:"serviceAccountName,omitempty"`
	NodeSelector          map[string]string `json:"nodeSelector,omitempty"`
	ActiveDeadlineSeconds int64             `json:"activeDeadlineSeconds"`
	SecretName            string            `json:"secretName,omitempty"`
	// HostPath is a node directory mounted at the same path in the pod, for
	// drivers that work on node storage (a local disk, a share every node mounts).
	HostPath string `json:"hostPath,omitempty"`
	// SecurityContext is the container's; nil only in records written before
	// it was recorded, which run with DefaultSecurityContext.
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
	// Template is what ConfigPodTemplate adds to the pods besides node
	// selector and container securityContext (merged into the fields above).
	Template *PodTemplate `json:"template,omitempty"`
}

// ParseConfigMap validates a provisioner ConfigMap. Pods run in
// defaultNamespace unless the ConfigMap says otherwise, with
// defaultDeadline seconds unless it says otherwise. The properties are the
// other keys. Every problem is reported, naming the ConfigMap and the key.
func ParseConfigMap(cm *corev1.ConfigMap, defaultNamespace string, defaultDeadline int64) (*PodConfig, Input, error) {
	ref := cm.Namespace + "/" + cm.Name
	r := &configMapReader{
		cfg:   &PodConfig{ConfigMap: ref, Namespace: defaultNamespace, ActiveDeadlineSeconds: defaultDeadline, SecurityContext: DefaultSecurityContext()},
		props: Input{},
	}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		r.read(k, cm.Data[k])
	}
	if v, ok := cm.Data[ConfigPodTemplate]; ok {
		r.errs = append(r.errs, r.cfg.mergeTemplate(v, r.scSet)...)
	}
	if len(cm.BinaryData) > 0 {
		r.errs = append(r.errs, fmt.Errorf("binaryData keys %s are not supported: use data", strings.Join(slices.Sorted(maps.Keys(cm.BinaryData)), ", ")))
	}
	r.errs = append(r.errs, r.cfg.check()...)
	if err := errors.Join(r.errs...); err != nil {
		return nil, nil, fmt.Errorf("provisioner ConfigMap %s is invalid: %w", ref, err)
	}
	return r.cfg, r.props, nil
}

// configMapReader is a provisioner ConfigMap being read, key by key.
type configMapReader struct {
	cfg   *PodConfig
	props Input
	errs  keyErrors
	// scSet says security-context was read: the pod template must not set
	// the container securityContext too.
	scSet bool
}

// read reads one key: a setting of the pods, or else a property passed to
// them.
func (r *configMapReader) read(k, raw string) {
	if k == ConfigPodTemplate {
		return // Merged by ParseConfigMap, once node-selector and security-context are read.
	}
	parse, ok := configKeyParsers[k]
	if !ok {
		if isReserved(k) {
			r.errs.add(k, "the name is reserved for what the provisioner passes to the driver: rename it")
		}
		r.props[k] = raw
		return
	}
	if err := parse(r, strings.TrimSpace(raw)); err != nil {
		r.errs.add(k, "%v", err)
	}
}

// configKeyParsers read the keys that configure the pods, each from its
// value with surrounding space trimmed. An error is reported under the key.
var configKeyParsers = map[string]func(r *configMapReader, v string) error{
	ConfigImage:              func(r *configMapReader, v string) error { r.cfg.Image = v; return nil },
	ConfigServiceAccountName: func(r *configMapReader, v string) error { r.cfg.ServiceAccountName = v; return nil },
	ConfigNamespace:          func(r *configMapReader, v string) error { r.cfg.Namespace = v; return nil },
	ConfigHostPath:           func(r *configMapReader, v string) error { r.cfg.HostPath = v; return nil },
	ConfigNodeSelector: func(r *configMapReader, v string) error {
		sel, err := parseNodeSelector(v)
		r.cfg.NodeSelector = sel
		return err
	},
	ConfigActiveDeadline: func(r *configMapReader, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a whole number of seconds of at least 1", v)
		}
		r.cfg.ActiveDeadlineSeconds = n
		return nil
	},
	ConfigSecurityContext: func(r *configMapReader, v string) error {
		sc := &corev1.SecurityContext{}
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(sc); err != nil {
			return fmt.Errorf("not a container securityContext in JSON (%w)", err)
		}
		r.cfg.SecurityContext = sc
		r.scSet = true
		return nil
	},
}

// keyErrors collects the problems of a provisioner ConfigMap, each naming
// its key.
type keyErrors []error

func (e *keyErrors) add(key, format string, args ...any) {
	*e = append(*e, fmt.Errorf("key %q: %s", key, fmt.Sprintf(format, args...)))
}

// check validates a PodConfig, whether it comes from a ConfigMap or from a
// PV's record, naming the ConfigMap key of each problem.
func (c *PodConfig) check() []error {
	var errs keyErrors
	if c.Image == "" {
		errs.add(ConfigImage, "is required: the container image that provisions and deletes volumes")
	}
	if c.ServiceAccountName != "" {
		if msgs := validation.IsDNS1123Subdomain(c.ServiceAccountName); len(msgs) > 0 {
			errs.add(ConfigServiceAccountName, "%q is not a valid service account name: %s", c.ServiceAccountName, strings.Join(msgs, "; "))
		}
	}
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs.add(ConfigNamespace, "%q is not a valid namespace: %s", c.Namespace, strings.Join(msgs, "; "))
	}
	for k, v := range c.NodeSelector {
		if !validLabel(k, v) {
			errs.add(ConfigNodeSelector, "%q=%q is not a valid label", k, v)
		}
	}
	if c.HostPath != "" && !cleanDirectory(c.HostPath) {
		errs.add(ConfigHostPath, "%q is not a clean absolute directory path other than /", c.HostPath)
	}
	if c.ActiveDeadlineSeconds < 1 {
		errs.add(ConfigActiveDeadline, "%d is not a whole number of seconds of at least 1", c.ActiveDeadlineSeconds)
	}
	if privileged(c.SecurityContext) {
		errs.add(ConfigSecurityContext, "privileged containers are not allowed: add only the capabilities the driver needs")
	}
	return append(errs, c.Template.check()...)
}

// validLabel reports whether k=v is a valid label.
func validLabel(k, v string) bool {
	return len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0
}

// cleanDirectory reports whether p is a clean absolute path other than /.
func cleanDirectory(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && p != "/"
}

// privileged reports whether sc makes a privileged container.
func privileged(sc *corev1.SecurityContext) bool {
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}

// mergeTemplate merges a pod template (ConfigPodTemplate) under the
// ConfigMap's other keys: its nodeSelector joins node-selector (a label
// both set differently is an error), and its container securityContext
// replaces the default as security-context would (setting both is an error).
func (c *PodConfig) mergeTemplate(s string, scSet bool) []error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("key %q: %s", ConfigPodTemplate, fmt.Sprintf(format, args...))
	}
	tpl, sc, sel, err := parsePodTemplate(s)
	if err != nil {
		var errs []error
		for _, e := range unjoin(err) {
			errs = append(errs, bad("%v", e))
		}
		return errs
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		v := sel[k]
		if !validLabel(k, v) {
			errs = append(errs, bad("field spec.nodeSelector: %q=%q is not a valid label", k, v))
			continue
		}
		if old, ok := c.NodeSelector[k]; ok && old != v {
			errs = append(errs, bad("field spec.nodeSelector: %s=%s contradicts key %q (%s=%s): set it in one place", k, v, ConfigNodeSelector, k, old))
			continue
		}
		if c.NodeSelector == nil {
			c.NodeSelector = map[string]string{}
		}
		c.NodeSelector[k] = v
	}
	if sc != nil {
		switch {
		case scSet:
			errs = append(errs, bad("field spec.containers[0].securityContext: key %q sets it too: set it in one place", ConfigSecurityContext))
		default:
			c.SecurityContext = sc
		}
	}
	c.Template = tpl
	return errs
}

// unjoin splits an errors.Join into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// parseNodeSelector reads "k=v,k2=v2".
func parseNodeSelector(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	sel := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value (expected for example disktype=ssd,zone=west)", pair)
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("label key %q is invalid: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return nil, fmt.Errorf("label value %q is invalid: %s", v, strings.Join(msgs, "; "))
		}
		sel[k] = v
	}
	return sel, nil
}

// podConfigFrom reads the PodConfig recorded on a PV, checked as a
// ConfigMap is.
func podConfigFrom(ann map[string]string) (*PodConfig, error) {
	s, ok := ann[AnnPod]
	if !ok {
		return nil, fmt.Errorf("annotation %s is missing", AnnPod)
	}
	var cfg PodConfig
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		return nil, fmt.Errorf("annotation %s is not valid JSON: %w", AnnPod, err)
	}
	if err := errors.Join(cfg.check()...); err != nil {
		return nil, fmt.Errorf("annotation %s is invalid: %w", AnnPod, err)
	}
	if cfg.SecurityContext == nil {
		cfg.SecurityContext = DefaultSecurityContext()
	}
	return &cfg, nil
}

// EnvName is the environment variable a provisioning pod gets an input key
// in: the reserved keys have fixed names (FLEX_PV_NAME, FLEX_REQUEST_BYTES,
// ...), any other key k is FLEX_PARAM_<k upper-cased, with every character
// other than A-Z, 0-9 and _ replaced by _>.
func EnvName(key string) string {
	if e, ok := reservedEnv[key]; ok {
		return e
	}
	var b strings.Builder
	b.WriteString("FLEX_PARAM_")
	for _, r := range strings.ToUpper(key) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// inputEnv returns the environment of an input, sorted by name, and refuses
// keys that would land in the same variable.
func inputEnv(in Input) ([]corev1.EnvVar, error) {
	byName := map[string]string{}
	var clashes []string
	for _, k := range slices.Sorted(maps.Keys(in)) {
		name := EnvName(k)
		if prev, ok := byName[name]; ok {
			clashes = append(clashes, fmt.Sprintf("%q and %q both become %s", prev, k, name))
			continue
		}
		byName[name] = k
	}
	if len(clashes) > 0 {
		return nil, fmt.Errorf("parameter names clash as environment variables: %s: rename one of each", strings.Join(clashes, "; "))
	}
	env := make([]corev1.EnvVar, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		env = append(env, corev1.EnvVar{Name: name, Value: in[byName[name]]})
	}
	return env, nil
}
