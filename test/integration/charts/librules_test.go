// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework/helm"
)

// The rules a Helm chart includes from kubeprov-common (the snippet in
// docs/migrating.md, as testdata/port-chart has it) are exactly the rules of
// the kustomize component lib/deploy/rbac, in its order: a library upgrade
// reaches Helm and kustomize users alike.
func TestLibraryRulesForHelmEqualTheKustomizeComponent(t *testing.T) {
	root := repoRoot(t)
	ch, err := loader.LoadDir("testdata/port-chart")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := helm.Template(ch, "port", "storage", nil)
	if err != nil {
		t.Fatal(err)
	}
	for kind, patch := range map[string]string{"ClusterRole": "clusterrole.yaml", "Role": "role.yaml"} {
		rendered := ofKind(objs, kind)
		if len(rendered) != 1 {
			t.Fatalf("the chart rendered %d %s objects, want 1", len(rendered), kind)
		}
		var got rbacv1.ClusterRole // a Role decodes into it too
		fromUnstructured(t, rendered[0], &got)
		want := componentRules(t, filepath.Join(root, "lib/deploy/rbac", patch))
		if !apiequality.Semantic.DeepEqual(got.Rules, want) {
			t.Errorf("%s rules from kubeprov-common:\n%s\nlib/deploy/rbac/%s adds:\n%s", kind, toYAML(t, got.Rules), patch, toYAML(t, want))
		}
	}
}

// componentRules are the rules a patch file of the kustomize component adds.
func componentRules(t *testing.T, path string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Op, Path string
		Value    rbacv1.PolicyRule
	}
	if err := yaml.Unmarshal(data, &ops); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var rules []rbacv1.PolicyRule
	for _, o := range ops {
		if o.Op != "add" || o.Path != "/rules/-" {
			t.Fatalf("%s: patch %s %s is not an added rule", path, o.Op, o.Path)
		}
		rules = append(rules, o.Value)
	}
	return rules
}
