// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "gold"}, Data: map[string]string{
		ConfigImage: "example.com/p:v1", ConfigServiceAccountName: "maker", ConfigNodeSelector: "disk=ssd, zone=west",
		ConfigNamespace: "work", ConfigActiveDeadline: "30", ConfigHostPath: "/srv/v", "plugin-name": "x", "zone": "west",
	}}
	cfg, props, err := ParseConfigMap(cm, "sys", 120)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConfigMap != "sys/gold" || cfg.Image != "example.com/p:v1" || cfg.ServiceAccountName != "maker" || cfg.Namespace != "work" ||
		cfg.ActiveDeadlineSeconds != 30 || cfg.HostPath != "/srv/v" || len(cfg.NodeSelector) != 2 || cfg.NodeSelector["zone"] != "west" {
		t.Errorf("config = %+v", cfg)
	}
	if len(props) != 2 || props["plugin-name"] != "x" || props["zone"] != "west" {
		t.Errorf("properties = %v", props)
	}
	cfg, _, err = ParseConfigMap(&corev1.ConfigMap{Data: map[string]string{ConfigImage: "i"}}, "sys", 120)
	if err != nil || cfg.Namespace != "sys" || cfg.ActiveDeadlineSeconds != 120 || cfg.NodeSelector != nil {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

// Every problem is reported at once, each naming its key.
func TestParseConfigMapErrors(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "bad"},
		Data: map[string]string{
			ConfigServiceAccountName: "Not_Valid", ConfigNamespace: "a.b", ConfigNodeSelector: "disk",
			ConfigActiveDeadline: "0", ConfigHostPath: "rel/path", "requestGiB": "1",
		},
		BinaryData: map[string][]byte{"blob": nil},
	}
	_, _, err := ParseConfigMap(cm, "sys", 120)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"provisioner ConfigMap sys/bad is invalid", `key "image": is required`, `key "service-account-name"`, `key "namespace"`,
		`key "node-selector": "disk" is not key=value`, `key "active-deadline-seconds"`, `key "host-path"`, `key "requestGiB": the name is reserved`,
		"binaryData keys blob",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseNodeSelector(t *testing.T) {
	for in, ok := range map[string]bool{"": true, "a=b": true, "a=b,c=": true, "example.com/x=y": true, "=b": false, "a=b,c": false, "a=b c": false, "a b=c": false} {
		if _, err := parseNodeSelector(in); (err == nil) != ok {
			t.Errorf("parseNodeSelector(%q): %v", in, err)
		}
	}
}

func TestEnvNames(t *testing.T) {
	for key, want := range map[string]string{
		KeyPVName: "FLEX_PV_NAME", KeyRequestGiB: "FLEX_REQUEST_GIB", "zone": "FLEX_PARAM_ZONE",
		"use-nfs-server": "FLEX_PARAM_USE_NFS_SERVER", "example.com/tier": "FLEX_PARAM_EXAMPLE_COM_TIER",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %s, want %s", key, got, want)
		}
	}
	env, err := inputEnv(Input{"b": "2", "a": "1", KeyPVName: "pv"})
	if err != nil || len(env) != 3 || env[0].Name != "FLEX_PARAM_A" || env[2].Name != "FLEX_PV_NAME" {
		t.Errorf("env = %v, %v", env, err)
	}
	if _, err := inputEnv(Input{"use-nfs": "1", "use_nfs": "2"}); err == nil || !strings.Contains(err.Error(), `"use-nfs" and "use_nfs" both become FLEX_PARAM_USE_NFS`) {
		t.Errorf("clash: %v", err)
	}
}

// Pods run restricted unless the ConfigMap says otherwise, and never privileged.
func TestSecurityContextKey(t *testing.T) {
	cfg, _, err := ParseConfigMap(&corev1.ConfigMap{Data: map[string]string{ConfigImage: "img"}}, "sys", 60)
	if err != nil {
		t.Fatal(err)
	}
	if sc := cfg.SecurityContext; sc == nil || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("default securityContext = %+v, want restricted", sc)
	}
	cfg, _, err = ParseConfigMap(&corev1.ConfigMap{Data: map[string]string{ConfigImage: "img",
		ConfigSecurityContext: `{"runAsUser": 0, "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]}}`}}, "sys", 60)
	if err != nil || *cfg.SecurityContext.RunAsUser != 0 || cfg.SecurityContext.Capabilities.Add[0] != "DAC_OVERRIDE" {
		t.Errorf("override: %+v, %v", cfg, err)
	}
	for value, want := range map[string]string{
		`{"privileged": true}`: "privileged containers are not allowed",
		`{"runAsUsr": 0}`:      `key "security-context": not a container securityContext in JSON`,
		`not json`:             `key "security-context"`,
	} {
		_, _, err := ParseConfigMap(&corev1.ConfigMap{Data: map[string]string{ConfigImage: "img", ConfigSecurityContext: value}}, "sys", 60)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", value, err, want)
		}
	}
}
