// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ReferenceGrants (Gateway API) let claims of one namespace use data
// sources of another (feature gate CrossNamespaceVolumeDataSource).
var referenceGrantResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1beta1", Resource: "referencegrants"}

// checkReferenceGrant says whether a ReferenceGrant in the data source's
// namespace lets claims of the claim's namespace refer to it: the grant
// belongs to the source's owner, the only one who may share it.
func (p *Provisioner) checkReferenceGrant(ctx context.Context, claimNamespace string, d *dataSource) error {
	what := fmt.Sprintf("%s %s/%s", d.kind, d.namespace, d.name)
	if p.cfg.Dynamic == nil {
		return fmt.Errorf("the claim's data source %s is in another namespace, and ReferenceGrants cannot be read", what)
	}
	grants, err := p.cfg.Dynamic.Resource(referenceGrantResource).Namespace(d.namespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the claim's data source %s is in another namespace, which needs a ReferenceGrant, but the ReferenceGrant API (%s) is not installed: install the Gateway API CRDs",
			what, referenceGrantResource.GroupVersion().String())
	case apierrors.IsForbidden(err):
		return fmt.Errorf("csi-provisioner may not list ReferenceGrants in namespace %s: grant it list on referencegrants.gateway.networking.k8s.io", d.namespace)
	case err != nil:
		return fmt.Errorf("listing ReferenceGrants in namespace %s: %w", d.namespace, err)
	}
	for i := range grants.Items {
		if referenceGrantAllows(&grants.Items[i], claimNamespace, d) {
			return nil
		}
	}
	return fmt.Errorf("no ReferenceGrant in namespace %s lets claims of namespace %s use %s: its owner must create one (from: PersistentVolumeClaim in %s, to: %s)",
		d.namespace, claimNamespace, what, claimNamespace, d.kind)
}

// referenceGrantAllows: g has a "from" entry for claims of claimNamespace
// and a "to" entry for the source's group and kind, with its name or none.
func referenceGrantAllows(g *unstructured.Unstructured, claimNamespace string, d *dataSource) bool {
	from, _, _ := unstructured.NestedSlice(g.Object, "spec", "from")
	to, _, _ := unstructured.NestedSlice(g.Object, "spec", "to")
	fromOK := false
	for _, f := range from {
		m, _ := f.(map[string]any)
		if m["group"] == "" && m["kind"] == "PersistentVolumeClaim" && m["namespace"] == claimNamespace {
			fromOK = true
			break
		}
	}
	if !fromOK {
		return false
	}
	for _, t := range to {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if m["group"] == d.apiGroup && m["kind"] == d.kind && (name == "" || name == d.name) {
			return true
		}
	}
	return false
}
