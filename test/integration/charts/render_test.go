// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/integration/release"
)

// repoRoot is the checkout's root directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := release.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// loadChart loads charts/<dir> as helm install does from a directory.
func loadChart(t testing.TB, dir string) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join(repoRoot(t), "charts", dir))
	if err != nil {
		t.Fatalf("load chart %s: %v", dir, err)
	}
	return ch
}

// render is `helm template <release> charts/<dir> --namespace <namespace>`
// with values (the --set/-f overrides) merged over the chart's defaults: the
// objects of every manifest, NOTES.txt aside, in install order.
func render(ch *chart.Chart, releaseName, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	if values == nil {
		values = map[string]any{}
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartcommon.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartcommon.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, m := range manifests {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(m.Content), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if len(obj) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	return objs, nil
}

// mustRender is render that fails the test on an error.
func mustRender(t testing.TB, ch *chart.Chart, releaseName, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(ch, releaseName, namespace, values)
	if err != nil {
		t.Fatalf("helm template %s: %v", ch.Name(), err)
	}
	return objs
}

// ofKind are the objects of kind among objs.
func ofKind(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if slices.Contains(kinds, obj.GetKind()) {
			out = append(out, obj)
		}
	}
	return out
}

// kinds lists the kinds of objs, sorted, once each.
func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, obj := range objs {
		if !slices.Contains(out, obj.GetKind()) {
			out = append(out, obj.GetKind())
		}
	}
	slices.Sort(out)
	return out
}
