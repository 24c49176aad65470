// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Reserved StorageClass parameters. Keys with ReservedPrefix are read by the
// provisioner and never passed to the driver as they are; any other key is
// the driver's.
const (
	ReservedPrefix = "csi.storage.k8s.io/"
	// ParamFSType is the filesystem of Filesystem volumes.
	ParamFSType = ReservedPrefix + "fstype"
	// LegacyParamFSType, in any case ("fsType"), is its deprecated spelling:
	// as upstream, it is the fsType when the class does not set ParamFSType
	// too, and reaches the driver like any key without the prefix.
	LegacyParamFSType = "fstype"
	// ParamSecretName and ParamSecretNamespace name the secret used for every
	// operation that has no secret of its own.
	ParamSecretName      = ReservedPrefix + "secret-name"
	ParamSecretNamespace = ReservedPrefix + "secret-namespace"

	// Parameters added for the driver with --extra-create-metadata.
	ParamPVCName      = ReservedPrefix + "pvc/name"
	ParamPVCNamespace = ReservedPrefix + "pvc/namespace"
	ParamPVName       = ReservedPrefix + "pv/name"
	// ParamPVCLabelPrefix and ParamPVCAnnotationPrefix, followed by the key,
	// carry the claim labels and annotations allowed by --forward-pvc-labels
	// and --forward-pvc-annotations.
	ParamPVCLabelPrefix      = ReservedPrefix + "pvc/labels/"
	ParamPVCAnnotationPrefix = ReservedPrefix + "pvc/annotations/"
)

// SecretKind is one use of a secret: the provisioner's own calls, or one of
// the calls other components make with the reference written into the PV.
type SecretKind int

// The secret kinds, in the order they are documented.
const (
	SecretProvisioner SecretKind = iota
	SecretControllerPublish
	SecretNodeStage
	SecretNodePublish
	SecretControllerExpand
	SecretNodeExpand
	// SecretControllerModify is for ControllerModifyVolume (a claim's
	// VolumeAttributesClass changed), which the external-resizer calls with
	// the reference the PV's annotations record.
	SecretControllerModify
	numSecretKinds
)

// secretKeys are the parameters that set one kind of secret.
type secretKeys struct {
	// what names the secret in messages.
	what string
	// name and namespace are the current keys.
	name, namespace string
	// legacyName and legacyNamespace are the deprecated keys, if the kind has any.
	legacyName, legacyNamespace string
}

// secretParameters is indexed by SecretKind.
var secretParameters = [numSecretKinds]secretKeys{
	SecretProvisioner: {what: "provisioner secret",
		name: ReservedPrefix + "provisioner-secret-name", namespace: ReservedPrefix + "provisioner-secret-namespace",
		legacyName: "csiProvisionerSecretName", legacyNamespace: "csiProvisionerSecretNamespace"},
	SecretControllerPublish: {what: "controller-publish secret",
		name: ReservedPrefix + "controller-publish-secret-name", namespace: ReservedPrefix + "controller-publish-secret-namespace",
		legacyName: "csiControllerPublishSecretName", legacyNamespace: "csiControllerPublishSecretNamespace"},
	SecretNodeStage: {what: "node-stage secret",
		name: ReservedPrefix + "node-stage-secret-name", namespace: ReservedPrefix + "node-stage-secret-namespace",
		legacyName: "csiNodeStageSecretName", legacyNamespace: "csiNodeStageSecretNamespace"},
	SecretNodePublish: {what: "node-publish secret",
		name: ReservedPrefix + "node-publish-secret-name", namespace: ReservedPrefix + "node-publish-secret-namespace",
		legacyName: "csiNodePublishSecretName", legacyNamespace: "csiNodePublishSecretNamespace"},
	SecretControllerExpand: {what: "controller-expand secret",
		name: ReservedPrefix + "controller-expand-secret-name", namespace: ReservedPrefix + "controller-expand-secret-namespace"},
	SecretNodeExpand: {what: "node-expand secret",
		name: ReservedPrefix + "node-expand-secret-name", namespace: ReservedPrefix + "node-expand-secret-namespace"},
	SecretControllerModify: {what: "controller-modify secret",
		name: ReservedPrefix + "controller-modify-secret-name", namespace: ReservedPrefix + "controller-modify-secret-namespace"},
}

// classParameters are a StorageClass's parameters, checked and split into
// what the provisioner uses and what the driver gets.
type classParameters struct {
	// driver are the parameters passed to CreateVolume (before metadata is added).
	driver map[string]string
	// fsType is the class's csi.storage.k8s.io/fstype, or its deprecated
	// spelling; possibly empty.
	fsType string
	// secrets holds each kind's templates; nil when the kind has no secret.
	secrets [numSecretKinds]*secretTemplates
	// legacyKeys are the deprecated keys in use (secrets, fsType), sorted.
	legacyKeys []string
}

// secretTemplates is a secret's name and namespace as the class gives them,
// with the keys they came from for messages.
type secretTemplates struct {
	what                  string
	nameKey, namespaceKey string
	name, namespace       template
}

// reservedKeys is the set of known keys with ReservedPrefix that a class may set.
func reservedKeys() map[string]bool {
	known := map[string]bool{ParamFSType: true, ParamSecretName: true, ParamSecretNamespace: true}
	for _, k := range secretParameters {
		known[k.name], known[k.namespace] = true, true
	}
	return known
}

// parseParameters checks a class's parameters. All problems are reported at
// once, each naming its parameter and the rule it breaks, so that one edit
// of the class fixes them all.
func parseParameters(params map[string]string) (*classParameters, error) {
	out := &classParameters{driver: map[string]string{}}
	problems := out.parseKeys(params)
	problems = append(problems, out.parseSecrets(params)...)
	sort.Strings(out.legacyKeys)
	if len(problems) > 0 {
		return nil, &ParameterError{Problems: problems}
	}
	return out, nil
}

// parseKeys sorts the keys, in order, into the driver's parameters and the
// fsType, and returns the problems: reserved keys nobody knows (a typo would
// otherwise be silently ignored) and the fsType set twice.
func (out *classParameters) parseKeys(params map[string]string) []string {
	known := reservedKeys()
	var problems []string
	var fsTypeKeys []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		if k == ParamFSType || strings.EqualFold(k, LegacyParamFSType) {
			fsTypeKeys = append(fsTypeKeys, fmt.Sprintf("%q", k))
			out.fsType = v
		}
		if !strings.HasPrefix(k, ReservedPrefix) {
			out.driver[k] = v
			if strings.EqualFold(k, LegacyParamFSType) {
				out.legacyKeys = append(out.legacyKeys, k)
			}
			continue
		}
		if !known[k] {
			problems = append(problems, fmt.Sprintf("parameter %q: unknown key with the reserved prefix %s (known keys: fstype, secret-name, secret-namespace, "+
				"and <kind>-secret-name, <kind>-secret-namespace for the kinds provisioner, controller-publish, node-stage, node-publish, controller-expand, node-expand, controller-modify): "+
				"fix the spelling or remove it", k, ReservedPrefix))
		}
	}
	if len(fsTypeKeys) > 1 {
		problems = append(problems, fmt.Sprintf("parameters %s both set the fsType: keep only %q (%q is its deprecated spelling)",
			strings.Join(fsTypeKeys, " and "), ParamFSType, LegacyParamFSType))
	}
	return problems
}

// parseSecrets sets each kind's secret and returns the problems: the default
// secret's first, then each kind's in SecretKind order.
func (out *classParameters) parseSecrets(params map[string]string) []string {
	var problems []string
	def, err := secretPair("default secret", params, ParamSecretName, ParamSecretNamespace)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for kind, keys := range secretParameters {
		var kindProblems []string
		out.secrets[kind], kindProblems = out.kindSecret(params, keys, def)
		problems = append(problems, kindProblems...)
	}
	return problems
}

// kindSecret is one kind's secret: its current keys, else its deprecated
// ones, else the default def (shared, so that a problem with the default
// secret is reported once); nil when the class mixes the spellings or sets
// none. It notes the deprecated keys in use.
func (out *classParameters) kindSecret(params map[string]string, keys secretKeys, def *secretTemplates) (*secretTemplates, []string) {
	var problems []string
	current, err := secretPair(keys.what, params, keys.name, keys.namespace)
	if err != nil {
		problems = append(problems, err.Error())
	}
	var legacy *secretTemplates
	if keys.legacyName != "" {
		legacy, err = secretPair(keys.what, params, keys.legacyName, keys.legacyNamespace)
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, k := range []string{keys.legacyName, keys.legacyNamespace} {
			if _, ok := params[k]; ok {
				out.legacyKeys = append(out.legacyKeys, k)
			}
		}
	}
	if conflict := mixedSpellings(params, keys); conflict != "" {
		return nil, append(problems, conflict)
	}
	switch {
	case current != nil:
		return current, problems
	case legacy != nil:
		return legacy, problems
	}
	return def, problems
}

// ParameterError lists what is wrong with a StorageClass's parameters.
type ParameterError struct {
	Problems []string
}

func (e *ParameterError) Error() string {
	return "invalid StorageClass parameters: " + strings.Join(e.Problems, "; ")
}

// secretPair reads one name/namespace pair of keys: both or neither must be
// set, and their templates must use only the variables allowed there.
func secretPair(what string, params map[string]string, nameKey, namespaceKey string) (*secretTemplates, error) {
	name, hasName := params[nameKey]
	namespace, hasNamespace := params[namespaceKey]
	switch {
	case !hasName && !hasNamespace:
		return nil, nil
	case hasName && !hasNamespace:
		return nil, fmt.Errorf("parameter %q is set but %q is not: the %s needs both its name and its namespace", nameKey, namespaceKey, what)
	case !hasName && hasNamespace:
		return nil, fmt.Errorf("parameter %q is set but %q is not: the %s needs both its name and its namespace", namespaceKey, nameKey, what)
	}
	var problems []string
	nameT, err := parseTemplate(nameKey, name, nameVariables)
	if err != nil {
		problems = append(problems, err.Error())
	}
	namespaceT, err := parseTemplate(namespaceKey, namespace, namespaceVariables)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &secretTemplates{what: what, nameKey: nameKey, namespaceKey: namespaceKey, name: nameT, namespace: namespaceT}, nil
}

// mixedSpellings reports a kind set with both its deprecated and its current keys.
func mixedSpellings(params map[string]string, keys secretKeys) string {
	if keys.legacyName == "" {
		return ""
	}
	var current, legacy []string
	for _, k := range []string{keys.name, keys.namespace} {
		if _, ok := params[k]; ok {
			current = append(current, fmt.Sprintf("%q", k))
		}
	}
	for _, k := range []string{keys.legacyName, keys.legacyNamespace} {
		if _, ok := params[k]; ok {
			legacy = append(legacy, fmt.Sprintf("%q", k))
		}
	}
	if len(current) == 0 || len(legacy) == 0 {
		return ""
	}
	return fmt.Sprintf("parameters %s and %s both set the %s: keep only %s and %s (the %s spelling is deprecated)",
		strings.Join(legacy, ", "), strings.Join(current, ", "), keys.what, keys.name, keys.namespace, keys.legacyName)
}
