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
const AnnPod = "flex.kubeprov.io/pod"

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
}

// ParseConfigMap validates a provisioner ConfigMap. Pods run in
// defaultNamespace unless the ConfigMap says otherwise, with
// defaultDeadline seconds unless it says otherwise. The properties are the
// other keys. Every problem is reported, naming the ConfigMap and the key.
func ParseConfigMap(cm *corev1.ConfigMap, defaultNamespace string, defaultDeadline int64) (*PodConfig, Input, error) {
	ref := cm.Namespace + "/" + cm.Name
	cfg := &PodConfig{ConfigMap: ref, Namespace: defaultNamespace, ActiveDeadlineSeconds: defaultDeadline}
	props := Input{}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("key %q: %s", key, fmt.Sprintf(format, args...)))
	}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		v := strings.TrimSpace(cm.Data[k])
		switch k {
		case ConfigImage:
			cfg.Image = v
		case ConfigServiceAccountName:
			if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
				bad(k, "%q is not a valid service account name: %s", v, strings.Join(msgs, "; "))
			}
			cfg.ServiceAccountName = v
		case ConfigNamespace:
			if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
				bad(k, "%q is not a valid namespace: %s", v, strings.Join(msgs, "; "))
			}
			cfg.Namespace = v
		case ConfigNodeSelector:
			sel, err := parseNodeSelector(v)
			if err != nil {
				bad(k, "%v", err)
			}
			cfg.NodeSelector = sel
		case ConfigHostPath:
			if !path.IsAbs(v) || path.Clean(v) != v || v == "/" {
				bad(k, "%q is not a clean absolute directory path other than /", v)
			}
			cfg.HostPath = v
		case ConfigActiveDeadline:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				bad(k, "%q is not a whole number of seconds of at least 1", v)
			}
			cfg.ActiveDeadlineSeconds = n
		default:
			if isReserved(k) {
				bad(k, "the name is reserved for what the provisioner passes to the driver: rename it")
			}
			props[k] = cm.Data[k]
		}
	}
	if len(cm.BinaryData) > 0 {
		errs = append(errs, fmt.Errorf("binaryData keys %s are not supported: use data", strings.Join(slices.Sorted(maps.Keys(cm.BinaryData)), ", ")))
	}
	if cfg.Image == "" {
		bad(ConfigImage, "is required: the container image that provisions and deletes volumes")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("provisioner ConfigMap %s is invalid: %w", ref, err)
	}
	return cfg, props, nil
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

// podConfigFrom reads the PodConfig recorded on a PV.
func podConfigFrom(ann map[string]string) (*PodConfig, error) {
	s, ok := ann[AnnPod]
	if !ok {
		return nil, fmt.Errorf("annotation %s is missing", AnnPod)
	}
	var cfg PodConfig
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		return nil, fmt.Errorf("annotation %s is not valid JSON: %w", AnnPod, err)
	}
	if cfg.Image == "" || cfg.Namespace == "" || cfg.ActiveDeadlineSeconds < 1 {
		return nil, fmt.Errorf("annotation %s lacks image, namespace or activeDeadlineSeconds", AnnPod)
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
