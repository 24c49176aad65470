// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Template variables of secret names and namespaces.
const (
	varPVName       = "pv.name"
	varPVCName      = "pvc.name"
	varPVCNamespace = "pvc.namespace"
)

var (
	annotationVariable = regexp.MustCompile(`^pvc\.annotations\['([^']+)'\]$`)
	// annotationReference finds annotation variables anywhere in a value.
	annotationReference = regexp.MustCompile(`\$\{pvc\.annotations\['([^']+)'\]\}`)
)

// templateAnnotations returns the claim annotations the templates among
// parameters read.
func templateAnnotations(parameters map[string]string) []string {
	var keys []string
	for _, v := range parameters {
		for _, m := range annotationReference.FindAllStringSubmatch(v, -1) {
			if !slices.Contains(keys, m[1]) {
				keys = append(keys, m[1])
			}
		}
	}
	return keys
}

// variableSet says which variables a template may use.
type variableSet struct {
	names       []string
	annotations bool
	// describe lists the allowed variables for messages.
	describe string
}

var (
	// Secret names may use everything about the claim.
	nameVariables = variableSet{
		names:       []string{varPVName, varPVCName, varPVCNamespace},
		annotations: true,
		describe:    "${pv.name}, ${pvc.name}, ${pvc.namespace}, ${pvc.annotations['KEY']}",
	}
	// Secret namespaces may not use what the claim's author chooses freely
	// (its name, its annotations): that would let any user point the
	// provisioner at secrets in another tenant's namespace.
	namespaceVariables = variableSet{
		names:    []string{varPVName, varPVCNamespace},
		describe: "${pv.name}, ${pvc.namespace}",
	}
)

func (s variableSet) allows(v string) bool {
	return slices.Contains(s.names, v) || (s.annotations && annotationVariable.MatchString(v))
}

// template is a parsed secret name or namespace: literal text and ${...}
// variables in order.
type template struct {
	key   string
	parts []templatePart
}

type templatePart struct {
	literal  string
	variable string // empty for a literal
}

// parseTemplate checks the variables of a parameter's value against allowed.
func parseTemplate(key, value string, allowed variableSet) (template, error) {
	t := template{key: key}
	if value == "" {
		return t, fmt.Errorf("parameter %q is empty", key)
	}
	rest := value
	for rest != "" {
		start := strings.Index(rest, "${")
		if start < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if start > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:start]})
		}
		end := strings.Index(rest[start:], "}")
		if end < 0 {
			return t, fmt.Errorf("parameter %q: %q has a ${ without its closing }", key, value)
		}
		v := rest[start+2 : start+end]
		if !allowed.allows(v) {
			if nameVariables.allows(v) {
				return t, fmt.Errorf("parameter %q: ${%s} is not allowed in a secret namespace, only %s are: the claim's author must not choose the namespace secrets are read from", key, v, allowed.describe)
			}
			return t, fmt.Errorf("parameter %q: unknown variable ${%s}; allowed here: %s", key, v, allowed.describe)
		}
		t.parts = append(t.parts, templatePart{variable: v})
		rest = rest[start+end+1:]
	}
	return t, nil
}

// templateValues are what variables resolve to.
type templateValues struct {
	pvName string
	claim  *corev1.PersistentVolumeClaim
}

// resolve fills in the variables.
func (t template) resolve(v templateValues) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.variable {
		case "":
			b.WriteString(p.literal)
		case varPVName:
			b.WriteString(v.pvName)
		case varPVCName:
			b.WriteString(v.claim.Name)
		case varPVCNamespace:
			b.WriteString(v.claim.Namespace)
		default:
			key := annotationVariable.FindStringSubmatch(p.variable)[1]
			value, ok := v.claim.Annotations[key]
			if !ok {
				return "", fmt.Errorf("parameter %q: claim %s/%s has no annotation %q (used by ${%s}): add it to the claim",
					t.key, v.claim.Namespace, v.claim.Name, key, p.variable)
			}
			b.WriteString(value)
		}
	}
	return b.String(), nil
}

// resolve resolves a secret's name and namespace and checks that they
// are valid object names.
func (s *secretTemplates) resolve(v templateValues) (*corev1.SecretReference, error) {
	namespace, err := s.namespace.resolve(v)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("parameter %q: the %s namespace resolves to %s, which is not a valid namespace name (DNS label): %s",
			s.namespaceKey, s.what, quoteName(namespace), strings.Join(errs, ", "))
	}
	name, err := s.name.resolve(v)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("parameter %q: the %s name resolves to %s, which is not a valid secret name (DNS subdomain): %s",
			s.nameKey, s.what, quoteName(name), strings.Join(errs, ", "))
	}
	return &corev1.SecretReference{Name: name, Namespace: namespace}, nil
}

// quoteName quotes a resolved name for a message, cut after the longest
// valid name: an annotation can make it huge, and the event that carries the
// message is truncated, which would hide the reason that follows.
func quoteName(s string) string {
	if len(s) <= validation.DNS1123SubdomainMaxLength {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:validation.DNS1123SubdomainMaxLength]) + "..."
}

// secretRefs are the resolved secrets by kind; nil where a kind has none.
type secretRefs [numSecretKinds]*corev1.SecretReference

// resolveSecrets resolves every secret of the class for one claim.
func (p *classParameters) resolveSecrets(v templateValues) (secretRefs, error) {
	var refs secretRefs
	var problems []string
	for kind, s := range p.secrets {
		if s == nil {
			continue
		}
		ref, err := s.resolve(v)
		if err != nil {
			if !slices.Contains(problems, err.Error()) {
				problems = append(problems, err.Error())
			}
			continue
		}
		refs[kind] = ref
	}
	if len(problems) > 0 {
		return refs, &ParameterError{Problems: problems}
	}
	return refs, nil
}
