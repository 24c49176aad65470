// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ReferenceGrants (Gateway API) let claims of one namespace use data
// sources of another (feature gate CrossNamespaceVolumeDataSource).
var referenceGrantResource = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1beta1", Resource: "referencegrants"}

// CrossNamespaceAccess decides whether a claim may use a data source in
// another namespace. The provisioner asks before it reads the source, and
// the cloning protection before a clone may hold its source: one rule for
// both, so that a claim that can never be cloned holds nothing either.
type CrossNamespaceAccess struct {
	// Enabled is feature gate CrossNamespaceVolumeDataSource; without it
	// no data source in another namespace is ever used.
	Enabled bool
	// Dynamic reads ReferenceGrants; nil means none can be read.
	Dynamic dynamic.Interface
}

// crossNamespaceAccess is the provisioner's own rule.
func (p *Provisioner) crossNamespaceAccess() CrossNamespaceAccess {
	return CrossNamespaceAccess{Enabled: p.cfg.CrossNamespaceDataSources, Dynamic: p.cfg.Dynamic}
}

// NotSharedError says that a claim's data source is in another namespace
// and is not shared with the claim's: the claim can never use it as it is.
type NotSharedError struct{ reason string }

func (e *NotSharedError) Error() string { return e.reason }

func notShared(format string, args ...any) error {
	return &NotSharedError{reason: fmt.Sprintf(format, args...)}
}

// Check returns nil when the claim may use its data source (none, one in
// its own namespace, or one a ReferenceGrant shares with it), a
// *NotSharedError when it may not, and another error when that cannot be
// told now (ReferenceGrants not readable yet).
func (a CrossNamespaceAccess) Check(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	d := claimDataSource(claim)
	switch {
	case d == nil || d.namespace == claim.Namespace:
		return nil
	case !a.Enabled:
		return notShared("the claim's data source %s %s/%s is in another namespace, which needs feature gate CrossNamespaceVolumeDataSource: use a source in namespace %s",
			d.kind, d.namespace, d.name, claim.Namespace)
	case d.isClaim() || d.isSnapshot():
		return a.checkReferenceGrant(ctx, claim.Namespace, d)
	}
	// A volume populator's source: the populator decides.
	return nil
}

// checkReferenceGrant says whether a ReferenceGrant in the data source's
// namespace lets claims of the claim's namespace refer to it: the grant
// belongs to the source's owner, the only one who may share it.
func (a CrossNamespaceAccess) checkReferenceGrant(ctx context.Context, claimNamespace string, d *dataSource) error {
	what := fmt.Sprintf("%s %s/%s", d.kind, d.namespace, d.name)
	if a.Dynamic == nil {
		return notShared("the claim's data source %s is in another namespace, and ReferenceGrants cannot be read", what)
	}
	grants, err := a.Dynamic.Resource(referenceGrantResource).Namespace(d.namespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return notShared("the claim's data source %s is in another namespace, which needs a ReferenceGrant, but the ReferenceGrant API (%s) is not installed: install the Gateway API CRDs",
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
	return notShared("no ReferenceGrant in namespace %s lets claims of namespace %s use %s: its owner must create one (from: PersistentVolumeClaim in %s, to: %s)",
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
