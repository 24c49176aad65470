// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"slices"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeprov/external-storage/test/framework/helm"
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
	ch, err := helm.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// mustRender is helm.Template that fails the test on an error.
func mustRender(t testing.TB, ch *chart.Chart, releaseName, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helm.Template(ch, releaseName, namespace, values)
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
