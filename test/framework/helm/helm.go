// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package helm renders the charts under charts/ with Helm's own engine
// (helm.sh/helm/v4, the library the helm CLI is made of), as helm template
// does: the chart tests (test/integration/charts) check what it renders, the
// e2e suite installs it on real nodes.
package helm

import (
	"fmt"
	"path/filepath"
	"strings"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework"
)

// Load loads charts/<dir> of the checkout as helm install does from a
// directory.
func Load(dir string) (*chart.Chart, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadDir(filepath.Join(root, "charts", dir))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	return ch, nil
}

// Template is `helm template <release> <chart> --namespace <namespace>`
// with values (the --set/-f overrides) merged over the chart's defaults: the
// objects of every manifest, NOTES.txt aside, in install order (helm
// uninstall deletes them in the reverse order).
func Template(ch *chart.Chart, releaseName, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	files, err := render(ch, releaseName, namespace, values)
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

// Notes is what helm install prints after installing: the chart's
// NOTES.txt rendered as Template renders the objects.
func Notes(ch *chart.Chart, releaseName, namespace string, values map[string]any) (string, error) {
	files, err := render(ch, releaseName, namespace, values)
	if err != nil {
		return "", err
	}
	notes, ok := files[ch.Name()+"/templates/NOTES.txt"]
	if !ok {
		return "", fmt.Errorf("chart %s has no templates/NOTES.txt", ch.Name())
	}
	return notes, nil
}

// render renders every template of ch for an install of releaseName into
// namespace with values over the chart's defaults, by file name.
func render(ch *chart.Chart, releaseName, namespace string, values map[string]any) (map[string]string, error) {
	if values == nil {
		values = map[string]any{}
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartcommon.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartcommon.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}
