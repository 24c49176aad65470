// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/controller"
)

// TestStorageClassConfigs: local-path's storageClassConfigs give each class
// its own nodePathMap or sharedFileSystemPath; a class it does not list is
// refused, on provision and on delete.
func TestStorageClassConfigs(t *testing.T) {
	d := mkdirs(t, 3)
	config := `{"nodePathMap":[],"storageClassConfigs":{
		"fast":{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["` + d[0] + `"]}]},
		"bulk":{"nodePathMap":[{"node":"` + node + `","paths":["` + d[1] + `"]}]},
		"shared":{"sharedFileSystemPath":"` + d[2] + `"}}}`
	p := configProvisioner(t, config, map[string]uint64{d[0]: 1 << 40, d[1]: 1 << 40, d[2]: 1 << 40})
	for i, class := range []string{"fast", "bulk", "shared"} {
		o := options(claim(corev1.ReadWriteOnce))
		o.StorageClass.Name = class
		pv := provision(t, p, o)
		if want := filepath.Join(d[i], "pvc-uid-1"); pv.Spec.HostPath.Path != want {
			t.Errorf("class %s: path %s, want %s", class, pv.Spec.HostPath.Path, want)
		}
		if shared := pv.Annotations[AnnShared] == "true"; shared != (class == "shared") || (pv.Spec.NodeAffinity == nil) != shared {
			t.Errorf("class %s: annotations %v, node affinity %v", class, pv.Annotations, pv.Spec.NodeAffinity)
		}
		if pv.Spec.StorageClassName != class {
			t.Fatalf("PV of class %q", pv.Spec.StorageClassName)
		}
		if err := p.Delete(t.Context(), pv); err != nil {
			t.Fatalf("class %s: Delete: %v", class, err)
		}
		assertEmpty(t, d[i])
	}
	// A shared class's claims are served for every node.
	pvc := claim(corev1.ReadWriteMany)
	pvc.Spec.StorageClassName = new("shared")
	pvc.Annotations = map[string]string{controller.AnnSelectedNode: "node-b"}
	if !p.ShouldProvision(t.Context(), pvc) {
		t.Error("a claim of the shared class on another node is not served")
	}

	o := options(claim(corev1.ReadWriteOnce))
	o.StorageClass.Name = "other"
	if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), `StorageClass "other" has no entry in config.json's storageClassConfigs (it has bulk, fast, shared)`) {
		t.Errorf("class not listed: got %v", err)
	}
	o.StorageClass.Name = "fast"
	pv := provision(t, p, o)
	pv.Spec.StorageClassName = "other"
	if err := p.Delete(t.Context(), pv); err == nil || !strings.Contains(err.Error(), "refusing to delete: StorageClass \"other\" has no entry") {
		t.Errorf("delete of a class not listed: got %v", err)
	}
	if got := entries(t, d[0]); len(got) != 1 {
		t.Errorf("%s holds %v, want the volume kept", d[0], got)
	}
}

func TestParseConfigStorageClassConfigs(t *testing.T) {
	m, err := ParseConfig([]byte(`{"nodePathMap":[],"storageClassConfigs":{"a":{"nodePathMap":[{"node":"n1","paths":["/a"]}]},"b":{"sharedFileSystemPath":"/s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.AllPaths(), ","); got != "/a,/s" {
		t.Errorf("AllPaths = %s, want /a,/s", got)
	}
	for in, want := range map[string]string{
		`{"nodePathMap":[{"node":"n1","paths":["/a"]}],"storageClassConfigs":{"a":{"sharedFileSystemPath":"/s"}}}`: "storageClassConfigs excludes a top-level nodePathMap and sharedFileSystemPath: set nodePathMap to []",
		`{"sharedFileSystemPath":"/t","storageClassConfigs":{"a":{"sharedFileSystemPath":"/s"}}}`:                  "storageClassConfigs excludes",
		`{"storageClassConfigs":{"a":{}}}`:                                                                         `storageClassConfigs["a"]: neither nodePathMap nor sharedFileSystemPath is set`,
		`{"storageClassConfigs":{"a":{"nodePathMap":[{"node":"n1","paths":["rel"]}]}}}`:                            `storageClassConfigs["a"]: node n1: path "rel" must be absolute`,
		`{"storageClassConfigs":{"a":{"nodePathMap":[{"node":"n1","paths":["/a"]}],"sharedFileSystemPath":"/s"}}}`: `storageClassConfigs["a"]: nodePathMap and sharedFileSystemPath exclude each other`,
		`{"storageClassConfigs":{"a":{"sharedFileSystemPath":"/s","setup":"x"}}}`:                                  `unknown key "setup"`,
	} {
		if _, err := ParseConfig([]byte(in)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v, want an ErrConfig containing %q", in, err, want)
		}
	}
}

// TestPathPatternTemplate: local-path's Go-template pathPattern, with its
// rule that the directory is under <namespace>/<claim>/ unless the class
// sets allowUnsafePathPattern, which never lifts the rules every pattern
// obeys.
func TestPathPatternTemplate(t *testing.T) {
	p, dir := newProvisioner(t)
	class := func(params, annotations map[string]string) controller.ProvisionOptions {
		o := options(claim(corev1.ReadWriteOnce))
		o.PVC.Labels = map[string]string{"app": "db"}
		o.PVC.Annotations = map[string]string{"dir": "../../etc"}
		o.StorageClass.Parameters = params
		o.StorageClass.Annotations = annotations
		return o
	}
	// local-path README's class.
	pv := provision(t, p, class(map[string]string{KeyPathPattern: "{{ .PVC.Namespace }}/{{ .PVC.Name }}/"}, nil))
	if want := filepath.Join(dir, "ns", "data"); pv.Spec.HostPath.Path != want || pv.Annotations[AnnDir] != "ns/data" {
		t.Errorf("path %s, annotation %q; want %s", pv.Spec.HostPath.Path, pv.Annotations[AnnDir], want)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	pv = provision(t, p, class(map[string]string{KeyPathPattern: "{{ .PVC.Namespace }}/{{ .PVC.Name }}/{{ .PVC.Labels.app }}"}, nil))
	if pv.Annotations[AnnDir] != "ns/data/db" {
		t.Errorf("annotation %q, want ns/data/db", pv.Annotations[AnnDir])
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}

	oldDefault := "{{ .PVName }}_{{ .PVC.Namespace }}_{{ .PVC.Name }}"
	_, _, err := p.Provision(t.Context(), class(map[string]string{KeyPathPattern: oldDefault}, nil))
	if err == nil || !strings.Contains(err.Error(), `it expands to "pvc-uid-1_ns_data", which is not under ns/data/`) ||
		!strings.Contains(err.Error(), `or set the class parameter allowUnsafePathPattern: "true"`) {
		t.Errorf("pattern outside <namespace>/<claim>: got %v", err)
	}
	for _, o := range []controller.ProvisionOptions{
		class(map[string]string{KeyPathPattern: oldDefault, KeyAllowUnsafePathPattern: "true"}, nil),
		class(map[string]string{KeyPathPattern: oldDefault}, map[string]string{KeyAllowUnsafePathPattern: "true"}),
	} {
		pv := provision(t, p, o)
		if pv.Annotations[AnnDir] != "pvc-uid-1_ns_data" {
			t.Errorf("allowUnsafePathPattern: annotation %q", pv.Annotations[AnnDir])
		}
		if err := p.Delete(t.Context(), pv); err != nil {
			t.Fatal(err)
		}
	}
	// The parameter wins over the annotation, as in local-path.
	if _, _, err := p.Provision(t.Context(), class(map[string]string{KeyPathPattern: oldDefault, KeyAllowUnsafePathPattern: "false"},
		map[string]string{KeyAllowUnsafePathPattern: "true"})); err == nil {
		t.Error("parameter false, annotation true: provisioned")
	}
	for params, want := range map[*map[string]string]string{
		{KeyPathPattern: "{{ .PVC.Annotations.dir }}", KeyAllowUnsafePathPattern: "true"}:           `it expands to "../../etc", which could leave the node path`,
		{KeyPathPattern: "/{{ .PVC.Name }}", KeyAllowUnsafePathPattern: "true"}:                     `it expands to "/data"`,
		{KeyPathPattern: "{{ range .PVC.Labels }}x{{ end }}", KeyAllowUnsafePathPattern: "true"}:    "is not supported",
		{KeyPathPattern: "{{ .PVC.Namespace }}/{{ .PVC.Name }}/", KeyAllowUnsafePathPattern: "yes"}: `parameter allowUnsafePathPattern "yes" is not a boolean`,
	} {
		if _, _, err := p.Provision(t.Context(), class(*params, nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want %q", *params, err, want)
		}
	}
	// ${...} patterns never had the prefix rule; the parameter is accepted.
	pv = provision(t, p, class(map[string]string{KeyPathPattern: "${.PV.name}", KeyAllowUnsafePathPattern: "true"}, nil))
	if pv.Annotations[AnnDir] != "pvc-uid-1" {
		t.Errorf("annotation %q", pv.Annotations[AnnDir])
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 1 || got[0] != "ns" {
		t.Errorf("root holds %v, want only ns", got)
	}
}

// TestLocalPathScriptPatternsRefused: userPattern, groupPattern and
// permPattern only feed local-path's setup script; as parameters or class
// annotations they are refused with what to do instead.
func TestLocalPathScriptPatternsRefused(t *testing.T) {
	p, dir := newProvisioner(t)
	for _, key := range localPathScriptKeys {
		for _, where := range []string{"parameter", "annotation"} {
			o := options(claim(corev1.ReadWriteOnce))
			m := map[string]string{key: "{{ .PVC.Annotations.owner }}"}
			if where == "parameter" {
				o.StorageClass.Parameters = m
			} else {
				o.StorageClass.Annotations = m
			}
			_, _, err := p.Provision(t.Context(), o)
			if want := "StorageClass hostpath: " + key + " is not supported: local-path hands it to its setup script, and hostpath-provisioner runs none"; err == nil || !strings.Contains(err.Error(), want) ||
				!strings.Contains(err.Error(), "give pods an fsGroup") {
				t.Errorf("%s %s: got %v, want %q", where, key, err, want)
			}
		}
	}
	assertEmpty(t, dir)
}

// TestNodeAffinityKeyParameter: local-path's per-class node label is
// honored when it is the provisioner's; another is refused, naming the
// flag that sets it.
func TestNodeAffinityKeyParameter(t *testing.T) {
	p, dir := newProvisioner(t)
	o := options(claim(corev1.ReadWriteOnce))
	o.StorageClass.Parameters = map[string]string{KeyNodeAffinityKey: "kubernetes.io/hostname"}
	pv := provision(t, p, o)
	if req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]; req.Key != "kubernetes.io/hostname" || req.Values[0] != node {
		t.Errorf("affinity %+v", req)
	}
	o.PVName = "pvc-uid-2"
	o.StorageClass.Parameters = map[string]string{KeyNodeAffinityKey: "example.com/stable-id"}
	if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(),
		"parameter nodeAffinityKey example.com/stable-id: this provisioner pins the volumes of every class by one node label, kubernetes.io/hostname (--node-label-key): start it with --node-label-key=example.com/stable-id") {
		t.Errorf("other key: got %v", err)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("%s holds %v", dir, got)
	}

	p, _ = newProvisioner(t, func(c *Config) { c.NodeLabelKey = "example.com/stable-id" })
	o.SelectedNodeName = node
	o.SelectedNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"example.com/stable-id": "id-7"}}}
	pv = provision(t, p, o)
	if req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]; req.Key != "example.com/stable-id" || req.Values[0] != "id-7" {
		t.Errorf("affinity %+v, want example.com/stable-id In [id-7]", req)
	}
}
