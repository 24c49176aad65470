// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"errors"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	provName = ReservedPrefix + "provisioner-secret-name"
	provNS   = ReservedPrefix + "provisioner-secret-namespace"
	pubName  = ReservedPrefix + "controller-publish-secret-name"
	pubNS    = ReservedPrefix + "controller-publish-secret-namespace"
	modName  = ReservedPrefix + "controller-modify-secret-name"
	modNS    = ReservedPrefix + "controller-modify-secret-namespace"
)

func testClaim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: "data", Namespace: "team-a", UID: "1234",
		Annotations: map[string]string{
			"secrets.example.com/name": "from-annotation", "bad": "Not_A_Name",
			"inject": "${pvc.namespace}", "traverse": "../../kube-system/admin", "huge": strings.Repeat("a", 1<<20),
		},
	}}
}

func ref(ns, name string) *corev1.SecretReference {
	return &corev1.SecretReference{Namespace: ns, Name: name}
}

// TestSecretParameters covers every rule of the secret parameters: both
// spellings, the default secret, pairs, conflicts, templates and the
// validity of what they resolve to.
func TestSecretParameters(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		// want are the resolved refs by kind; kinds not listed must be nil.
		want map[SecretKind]*corev1.SecretReference
		// wantErr are substrings of the error; empty means success.
		wantErr []string
		// wantLegacy are the deprecated keys reported.
		wantLegacy []string
	}{
		{name: "no secrets", params: map[string]string{"type": "fast"}},
		{
			name:   "current spelling of every kind",
			params: allKinds(func(k secretKeys) (string, string) { return k.name, k.namespace }),
			want: map[SecretKind]*corev1.SecretReference{
				SecretProvisioner: ref("ns", "s0"), SecretControllerPublish: ref("ns", "s1"), SecretNodeStage: ref("ns", "s2"),
				SecretNodePublish: ref("ns", "s3"), SecretControllerExpand: ref("ns", "s4"), SecretNodeExpand: ref("ns", "s5"),
				SecretControllerModify: ref("ns", "s6"),
			},
		},
		{
			name: "legacy spelling of every kind that has one",
			params: allKinds(func(k secretKeys) (string, string) {
				if k.legacyName == "" {
					return k.name, k.namespace
				}
				return k.legacyName, k.legacyNamespace
			}),
			want: map[SecretKind]*corev1.SecretReference{
				SecretProvisioner: ref("ns", "s0"), SecretControllerPublish: ref("ns", "s1"), SecretNodeStage: ref("ns", "s2"),
				SecretNodePublish: ref("ns", "s3"), SecretControllerExpand: ref("ns", "s4"), SecretNodeExpand: ref("ns", "s5"),
				SecretControllerModify: ref("ns", "s6"),
			},
			wantLegacy: []string{"csiControllerPublishSecretName", "csiControllerPublishSecretNamespace", "csiNodePublishSecretName",
				"csiNodePublishSecretNamespace", "csiNodeStageSecretName", "csiNodeStageSecretNamespace", "csiProvisionerSecretName", "csiProvisionerSecretNamespace"},
		},
		{
			name:   "default secret fills every kind",
			params: map[string]string{ParamSecretName: "shared", ParamSecretNamespace: "ns"},
			want: map[SecretKind]*corev1.SecretReference{
				SecretProvisioner: ref("ns", "shared"), SecretControllerPublish: ref("ns", "shared"), SecretNodeStage: ref("ns", "shared"),
				SecretNodePublish: ref("ns", "shared"), SecretControllerExpand: ref("ns", "shared"), SecretNodeExpand: ref("ns", "shared"),
				SecretControllerModify: ref("ns", "shared"),
			},
		},
		{
			name:   "own secret wins over the default",
			params: map[string]string{ParamSecretName: "shared", ParamSecretNamespace: "ns", provName: "own", provNS: "other"},
			want: map[SecretKind]*corev1.SecretReference{
				SecretProvisioner: ref("other", "own"), SecretControllerPublish: ref("ns", "shared"), SecretNodeStage: ref("ns", "shared"),
				SecretNodePublish: ref("ns", "shared"), SecretControllerExpand: ref("ns", "shared"), SecretNodeExpand: ref("ns", "shared"),
				SecretControllerModify: ref("ns", "shared"),
			},
		},
		{
			name:   "legacy secret wins over the default",
			params: map[string]string{ParamSecretName: "shared", ParamSecretNamespace: "ns", "csiNodeStageSecretName": "old", "csiNodeStageSecretNamespace": "ns"},
			want: map[SecretKind]*corev1.SecretReference{
				SecretProvisioner: ref("ns", "shared"), SecretControllerPublish: ref("ns", "shared"), SecretNodeStage: ref("ns", "old"),
				SecretNodePublish: ref("ns", "shared"), SecretControllerExpand: ref("ns", "shared"), SecretNodeExpand: ref("ns", "shared"),
				SecretControllerModify: ref("ns", "shared"),
			},
			wantLegacy: []string{"csiNodeStageSecretName", "csiNodeStageSecretNamespace"},
		},
		{
			name: "templates in names and namespaces",
			params: map[string]string{
				provName: "${pv.name}-${pvc.name}-${pvc.namespace}", provNS: "${pvc.namespace}",
				pubName: "${pvc.annotations['secrets.example.com/name']}", pubNS: "ns-${pv.name}",
			},
			want: map[SecretKind]*corev1.SecretReference{
				SecretProvisioner:       ref("team-a", "pvc-1234-data-team-a"),
				SecretControllerPublish: ref("ns-pvc-1234", "from-annotation"),
			},
		},
		{
			name:    "old and new spelling together",
			params:  map[string]string{"csiProvisionerSecretName": "a", "csiProvisionerSecretNamespace": "ns", provName: "b", provNS: "ns"},
			wantErr: []string{`"csiProvisionerSecretName", "csiProvisionerSecretNamespace" and "` + provName + `", "` + provNS + `" both set the provisioner secret`},
		},
		{
			name:    "old name with new namespace",
			params:  map[string]string{"csiNodePublishSecretName": "a", ReservedPrefix + "node-publish-secret-namespace": "ns"},
			wantErr: []string{"both set the node-publish secret"},
		},
		{
			name:    "name without namespace",
			params:  map[string]string{provName: "a"},
			wantErr: []string{`parameter "` + provName + `" is set but "` + provNS + `" is not`},
		},
		{
			name:    "namespace without name",
			params:  map[string]string{ReservedPrefix + "node-expand-secret-namespace": "ns"},
			wantErr: []string{`parameter "` + ReservedPrefix + `node-expand-secret-namespace" is set but "` + ReservedPrefix + `node-expand-secret-name" is not`},
		},
		{
			name:    "legacy name without namespace",
			params:  map[string]string{"csiControllerPublishSecretName": "a"},
			wantErr: []string{`parameter "csiControllerPublishSecretName" is set but "csiControllerPublishSecretNamespace" is not`},
		},
		{
			name:    "default name without namespace",
			params:  map[string]string{ParamSecretName: "a"},
			wantErr: []string{`parameter "` + ParamSecretName + `" is set but "` + ParamSecretNamespace + `" is not`},
		},
		{
			name:    "claim name in a namespace",
			params:  map[string]string{provName: "a", provNS: "${pvc.name}"},
			wantErr: []string{`parameter "` + provNS + `": ${pvc.name} is not allowed in a secret namespace`},
		},
		{
			name:    "annotation in a namespace",
			params:  map[string]string{provName: "a", provNS: "${pvc.annotations['x']}"},
			wantErr: []string{"${pvc.annotations['x']} is not allowed in a secret namespace"},
		},
		{
			name:    "unknown variable",
			params:  map[string]string{provName: "${pvc.uid}", provNS: "ns"},
			wantErr: []string{`parameter "` + provName + `": unknown variable ${pvc.uid}`},
		},
		{
			name:    "unterminated variable",
			params:  map[string]string{provName: "${pv.name", provNS: "ns"},
			wantErr: []string{"has a ${ without its closing }"},
		},
		{
			name:    "empty name",
			params:  map[string]string{provName: "", provNS: "ns"},
			wantErr: []string{`parameter "` + provName + `" is empty`},
		},
		{
			name:    "missing annotation",
			params:  map[string]string{provName: "${pvc.annotations['absent']}", provNS: "ns"},
			wantErr: []string{`claim team-a/data has no annotation "absent"`},
		},
		{
			name:    "name that resolves to an invalid name",
			params:  map[string]string{provName: "${pvc.annotations['bad']}", provNS: "ns"},
			wantErr: []string{`the provisioner secret name resolves to "Not_A_Name", which is not a valid secret name (DNS subdomain)`},
		},
		{
			name:    "annotation holding a variable is not expanded again",
			params:  map[string]string{provName: "${pvc.annotations['inject']}", provNS: "ns"},
			wantErr: []string{`the provisioner secret name resolves to "${pvc.namespace}", which is not a valid secret name (DNS subdomain)`},
		},
		{
			name:    "annotation holding a path",
			params:  map[string]string{provName: "${pvc.annotations['traverse']}", provNS: "ns"},
			wantErr: []string{`the provisioner secret name resolves to "../../kube-system/admin", which is not a valid secret name`},
		},
		{
			name:    "huge annotation is cut so that the reason shows",
			params:  map[string]string{provName: "${pvc.annotations['huge']}", provNS: "ns"},
			wantErr: []string{`resolves to "` + strings.Repeat("a", 253) + `"..., which is not a valid secret name (DNS subdomain): must be no more than 253 characters`},
		},
		{
			name:    "NUL byte in a name",
			params:  map[string]string{provName: "sec\x00ret", provNS: "ns"},
			wantErr: []string{`resolves to "sec\x00ret", which is not a valid secret name`},
		},
		{
			name:    "traversing namespace",
			params:  map[string]string{provName: "s", provNS: "../kube-system"},
			wantErr: []string{`the provisioner secret namespace resolves to "../kube-system", which is not a valid namespace name (DNS label)`},
		},
		{
			name:    "nested variable",
			params:  map[string]string{provName: "${pvc.annotations['${pvc.name}']}", provNS: "ns"},
			wantErr: []string{`parameter "` + provName + `": unknown variable ${pvc.annotations['${pvc.name}; allowed here: ${pv.name}, ${pvc.name}`},
		},
		{
			name:    "namespace that is not a DNS label",
			params:  map[string]string{provName: "a", provNS: "a.b"},
			wantErr: []string{`the provisioner secret namespace resolves to "a.b", which is not a valid namespace name (DNS label)`},
		},
		{
			name:    "unknown reserved key",
			params:  map[string]string{ReservedPrefix + "provisioner-secret": "a"},
			wantErr: []string{`parameter "` + ReservedPrefix + `provisioner-secret": unknown key with the reserved prefix`},
		},
		{
			name:    "metadata keys are the provisioner's to set",
			params:  map[string]string{ParamPVCName: "x"},
			wantErr: []string{`parameter "` + ParamPVCName + `": unknown key`},
		},
		{
			name:    "every problem at once",
			params:  map[string]string{ReservedPrefix + "typo": "a", provName: "a", pubName: "${x}", pubNS: "ns"},
			wantErr: []string{`"` + ReservedPrefix + `typo"`, `"` + provName + `" is set but`, "unknown variable ${x}"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := parseParameters(tc.params)
			var refs secretRefs
			if err == nil {
				refs, err = parsed.resolveSecrets(templateValues{pvName: "pvc-1234", claim: testClaim()})
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("want an error containing %q, got none", tc.wantErr)
				}
				var perr *ParameterError
				if !errors.As(err, &perr) {
					t.Errorf("error is not a *ParameterError: %T", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			for kind := range numSecretKinds {
				got, want := refs[kind], tc.want[kind]
				if (got == nil) != (want == nil) || (got != nil && *got != *want) {
					t.Errorf("%s: got %v, want %v", secretParameters[kind].what, got, want)
				}
			}
			if strings.Join(parsed.legacyKeys, ",") != strings.Join(tc.wantLegacy, ",") {
				t.Errorf("legacy keys %v, want %v", parsed.legacyKeys, tc.wantLegacy)
			}
		})
	}
}

// allKinds sets a secret s<kind> in namespace ns for every kind, with the
// keys keysOf picks.
func allKinds(keysOf func(secretKeys) (string, string)) map[string]string {
	out := map[string]string{}
	for i, k := range secretParameters {
		name, ns := keysOf(k)
		out[name] = "s" + string(rune('0'+i))
		out[ns] = "ns"
	}
	return out
}

// TestDriverParameters: reserved keys are removed, legacy secret keys and
// everything else are the driver's, unchanged.
func TestDriverParameters(t *testing.T) {
	params := map[string]string{
		"type": "fast", ParamFSType: "xfs", modName: "m", modNS: "ns", provName: "s", provNS: "ns", ParamSecretName: "d", ParamSecretNamespace: "ns",
		"csiNodeStageSecretName": "old", "csiNodeStageSecretNamespace": "ns",
	}
	parsed, err := parseParameters(params)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"type": "fast", "csiNodeStageSecretName": "old", "csiNodeStageSecretNamespace": "ns"}
	if !maps.Equal(parsed.driver, want) {
		t.Errorf("driver parameters %v, want %v", parsed.driver, want)
	}
	if parsed.fsType != "xfs" {
		t.Errorf("fsType %q, want xfs", parsed.fsType)
	}
}

// TestTemplateParsing checks the template grammar on its own.
func TestTemplateParsing(t *testing.T) {
	tests := []struct {
		value   string
		allowed variableSet
		want    string
		wantErr string
	}{
		{value: "plain", allowed: nameVariables, want: "plain"},
		{value: "${pv.name}", allowed: namespaceVariables, want: "pv-1"},
		{value: "a-${pvc.namespace}-b-${pvc.name}-c", allowed: nameVariables, want: "a-ns-b-claim-c"},
		{value: "${pvc.annotations['k/v.x']}", allowed: nameVariables, want: "annotated"},
		{value: "$pv.name", allowed: nameVariables, want: "$pv.name"},
		{value: "${}", allowed: nameVariables, wantErr: "unknown variable ${}"},
		{value: "${pvc.annotations[k]}", allowed: nameVariables, wantErr: "unknown variable"},
		{value: "${pvc.annotations['k']}", allowed: namespaceVariables, wantErr: "not allowed in a secret namespace"},
		{value: "x${pv.name", allowed: nameVariables, wantErr: "without its closing }"},
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns", Annotations: map[string]string{"k/v.x": "annotated"}}}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			tmpl, err := parseTemplate("key", tc.value, tc.allowed)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.resolve(templateValues{pvName: "pv-1", claim: claim})
			if err != nil || got != tc.want {
				t.Errorf("resolved to %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
