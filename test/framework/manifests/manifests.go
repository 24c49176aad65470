// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manifests builds the kustomizations users apply, as kubectl apply
// -k does, and reaches their objects, of any kind, on the test control
// plane. It is a package of its own so that only the tests of manifests
// link kustomize.
package manifests

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubeprov/external-storage/test/framework"
)

// Render builds the kustomization in dir in-process, as kubectl apply -k
// does.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, err
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// Client reaches objects of any kind the API server serves, through the
// dynamic client.
type Client struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// NewClient is a Client of cp's API server, as its admin.
func NewClient(cp *framework.ControlPlane) (*Client, error) {
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cp.RestConfig())
	if err != nil {
		return nil, err
	}
	return &Client{kube: cp.Client, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

// Mapping is the resource of obj's kind; the error names a kind the API
// server does not serve.
func (c *Client) Mapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the API server does not serve this kind (a missing CRD?): %w", gvk, obj.GetName(), err)
	}
	return m, nil
}

// Resource is the client of obj's resource, in obj's namespace if the
// resource is namespaced.
func (c *Client) Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := c.Mapping(obj)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// Delete deletes obj; one that is gone already is no error. A Namespace is
// deleted with framework.DeleteNamespace, which finishes the deletion: no
// namespace controller runs.
func (c *Client) Delete(ctx context.Context, obj *unstructured.Unstructured) error {
	if obj.GetKind() == "Namespace" {
		return framework.DeleteNamespace(ctx, c.kube, obj.GetName())
	}
	r, err := c.Resource(obj)
	if err != nil {
		return err
	}
	if err := r.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// Workload is a Deployment, DaemonSet or StatefulSet.
type Workload struct {
	Kind, Namespace, Name string
	// Pod is its pod template.
	Pod corev1.PodTemplateSpec
}

func (w Workload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// Workloads are the Deployments, DaemonSets and StatefulSets among objs.
func Workloads(objs []*unstructured.Unstructured) ([]Workload, error) {
	var out []Workload
	for _, obj := range objs {
		var typed interface{ template() corev1.PodTemplateSpec }
		switch obj.GetKind() {
		case "Deployment":
			typed = &deployment{}
		case "DaemonSet":
			typed = &daemonSet{}
		case "StatefulSet":
			typed = &statefulSet{}
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, Workload{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Pod: typed.template()})
	}
	return out, nil
}

type (
	deployment  struct{ appsv1.Deployment }
	daemonSet   struct{ appsv1.DaemonSet }
	statefulSet struct{ appsv1.StatefulSet }
)

func (d *deployment) template() corev1.PodTemplateSpec  { return d.Spec.Template }
func (d *daemonSet) template() corev1.PodTemplateSpec   { return d.Spec.Template }
func (s *statefulSet) template() corev1.PodTemplateSpec { return s.Spec.Template }

// rbacKinds are the kinds RBAC and CreateTestRBAC take from a rendering.
var rbacKinds = []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// RBAC renders the kustomization in dir and returns its ClusterRoles,
// ClusterRoleBindings, Roles and RoleBindings, typed, as users get them: with
// the library's rules that the component lib/deploy/rbac adds.
func RBAC(dir string) ([]runtime.Object, error) {
	objs, err := Render(dir)
	if err != nil {
		return nil, err
	}
	return typedRBAC(objs)
}

// typedRBAC are the RBAC objects among objs, typed.
func typedRBAC(objs []*unstructured.Unstructured) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, obj := range objs {
		if !slices.Contains(rbacKinds, obj.GetKind()) {
			continue
		}
		typed, err := scheme.Scheme.New(obj.GroupVersionKind())
		if err != nil {
			return nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, typed)
	}
	return out, nil
}

// WaitUntilAuthorized is framework.WaitUntilAuthorized for the RBAC objects
// among objs, once they are created: a workload created right after its
// RBAC acts before the authorizer's informers have seen it.
func (c *Client) WaitUntilAuthorized(ctx context.Context, objs []*unstructured.Unstructured) error {
	rbac, err := typedRBAC(objs)
	if err != nil {
		return err
	}
	return framework.WaitUntilAuthorized(ctx, c.kube, rbac...)
}

// CreateTestRBAC creates the RBAC objects the kustomization in dir renders
// (see RBAC), as framework.ControlPlane.CreateTestRBACObjects does: each
// after edit, if set, changed it.
func CreateTestRBAC(t testing.TB, cp *framework.ControlPlane, dir string, edit func(runtime.Object)) {
	t.Helper()
	objs, err := RBAC(dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	cp.CreateTestRBACObjects(t, dir, objs, edit)
}
