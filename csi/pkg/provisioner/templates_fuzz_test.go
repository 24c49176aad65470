// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzSecretTemplates feeds the provisioner secret's name and namespace
// templates and everything they can refer to. Whatever they hold, parsing and
// resolving either fail with a *ParameterError or give a valid secret
// reference; the namespace never depends on what the claim's author chooses
// (its name and annotations); and parsing loses or invents no text.
func FuzzSecretTemplates(f *testing.F) {
	f.Fuzz(func(t *testing.T, nameTmpl, namespaceTmpl, pvName, claimNamespace, claimName, annKey, annValue string) {
		for _, tc := range []struct {
			value   string
			allowed variableSet
		}{{nameTmpl, nameVariables}, {namespaceTmpl, namespaceVariables}} {
			if tmpl, err := parseTemplate("key", tc.value, tc.allowed); err == nil {
				if got := tmpl.String(); got != tc.value {
					t.Fatalf("template %q parses into parts that spell %q", tc.value, got)
				}
			}
		}

		parsed, err := parseParameters(map[string]string{provName: nameTmpl, provNS: namespaceTmpl})
		if err != nil {
			problems(t, err)
			return
		}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: claimNamespace, Name: claimName, Annotations: map[string]string{annKey: annValue},
		}}
		v := templateValues{pvName: pvName, claim: claim}

		// Another claim in the same namespace, of another author's choosing.
		other := claim.DeepCopy()
		other.Name += "-other"
		other.Annotations = map[string]string{annKey: annValue + "-other", "x": "y"}
		s := parsed.secrets[SecretProvisioner]
		ns1, err1 := s.namespace.resolve(v)
		ns2, err2 := s.namespace.resolve(templateValues{pvName: pvName, claim: other})
		if ns1 != ns2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("secret namespace %q depends on the claim's name or annotations: %q, %v vs %q, %v", namespaceTmpl, ns1, err1, ns2, err2)
		}

		refs, err := parsed.resolveSecrets(v)
		if err != nil {
			problems(t, err)
			return
		}
		ref := refs[SecretProvisioner]
		if ref == nil {
			t.Fatal("no provisioner secret resolved, and no error")
		}
		if errs := validation.IsDNS1123Subdomain(ref.Name); len(errs) > 0 {
			t.Fatalf("secret name %q is not a valid object name: %v", ref.Name, errs)
		}
		if errs := validation.IsDNS1123Label(ref.Namespace); len(errs) > 0 {
			t.Fatalf("secret namespace %q is not a valid namespace name: %v", ref.Namespace, errs)
		}
	})
}

// String spells the template back.
func (t template) String() string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.variable == "" {
			b.WriteString(p.literal)
		} else {
			b.WriteString("${" + p.variable + "}")
		}
	}
	return b.String()
}

// problems checks that err is the error a user sees in the
// ProvisioningFailed event, a *ParameterError, and returns its problems.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var perr *ParameterError
	if !errors.As(err, &perr) || len(perr.Problems) == 0 {
		t.Fatalf("error %v (%T) is not a *ParameterError with problems", err, err)
	}
	return perr.Problems
}
