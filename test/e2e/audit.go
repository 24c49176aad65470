// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// ProvisionerNamespaces are the namespaces the provisioners' deploy/
// kustomizations (<module>/deploy and the directories right below it) put
// their Namespaces and ServiceAccounts in, sorted: what users install.
func ProvisionerNamespaces() ([]string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, pattern := range []string{"*/deploy/kustomization.yaml", "*/deploy/*/kustomization.yaml"} {
		found, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	var namespaces []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if head.Kind == "Component" {
			continue // a part of the others (lib/deploy/rbac), not installed alone
		}
		objs, err := manifests.Render(filepath.Dir(file))
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", filepath.Dir(file), err)
		}
		for _, obj := range objs {
			switch obj.GetKind() {
			case "Namespace":
				namespaces = append(namespaces, obj.GetName())
			case "ServiceAccount":
				namespaces = append(namespaces, obj.GetNamespace())
			}
		}
	}
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	if len(namespaces) == 0 {
		return nil, fmt.Errorf("no Namespace or ServiceAccount in any %s/*/deploy kustomization", root)
	}
	return namespaces, nil
}

// chartNamespacePrefix starts the name of every namespace the suite
// installs a chart into, so that CheckProvisionersNeverForbidden covers the
// ServiceAccounts of the releases too.
const chartNamespacePrefix = "chart-"

// upstreamNamespacePrefix starts the name of every namespace the suite
// installs csi-provisioner into in the shape of upstream's manifests
// (TestCSIUpstreamShapes), so that CheckProvisionersNeverForbidden covers
// their ServiceAccounts too.
const upstreamNamespacePrefix = "upstream-"

// CheckProvisionersNeverForbidden fails if the API server refused (403) any
// request of a ServiceAccount of a provisioner's namespace
// (ProvisionerNamespaces) or of a namespace a chart or upstream's shape was
// installed into (its name starts with chartNamespacePrefix or
// upstreamNamespacePrefix) since the cluster started, from
// its audit log (cluster Options.AuditLog): the RBAC a deploy/
// kustomization or a chart grants lacks something its provisioner calls. The error lists every such request. Run
// it once the provisioners are uninstalled, so that their last requests (a
// graceful stop's) count too.
func CheckProvisionersNeverForbidden(ctx context.Context, c *cluster.Cluster) error {
	namespaces, err := ProvisionerNamespaces()
	if err != nil {
		return err
	}
	prefixes := make([]string, len(namespaces), len(namespaces)+2)
	for i, ns := range namespaces {
		prefixes[i] = "system:serviceaccount:" + ns + ":"
	}
	prefixes = append(prefixes, "system:serviceaccount:"+chartNamespacePrefix, "system:serviceaccount:"+upstreamNamespacePrefix)
	refused, err := c.Forbidden(ctx, func(user string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(user, p) })
	})
	if err != nil {
		return fmt.Errorf("reading the audit log for the provisioners' ServiceAccounts: %w", err)
	}
	if len(refused) == 0 {
		return nil
	}
	lines := make([]string, len(refused))
	for i, e := range refused {
		lines[i] = "  " + e.Username() + ": " + e.String()
	}
	return fmt.Errorf("the API server refused %d request(s) of provisioner ServiceAccounts (namespaces %s, %s*, %s*): their deploy/ or chart RBAC lacks something they call:\n%s",
		len(refused), strings.Join(namespaces, ", "), chartNamespacePrefix, upstreamNamespacePrefix, strings.Join(lines, "\n"))
}
