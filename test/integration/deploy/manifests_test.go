// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/integration/release"
)

const (
	fieldManager = "kubeprov-deploy-test"
	// imageRepo is where make push publishes by default (hack/build.make).
	imageRepo = "ghcr.io/kubeprov/"
)

// realKinds are created for real, in this order: the RBAC check asks the API
// server about them. Everything else only goes through a dry-run.
var realKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"}

// kustomization is one directory with a kustomization.yaml under a
// provisioner's deploy/.
type kustomization struct {
	provisioner string // top directory, e.g. nfs
	path        string // relative to the root, e.g. nfs/deploy/server
}

// TestManifests builds each kustomization as `kubectl apply -k` would and
// applies it: namespaces and RBAC for real, everything else with a
// server-side dry-run. Then it checks the images of the workloads and the
// permissions of their ServiceAccounts. Kustomizations run one at a time and
// remove what they created, since several share namespaces and names.
func TestManifests(t *testing.T) {
	root, err := release.Root()
	if err != nil {
		t.Fatal(err)
	}
	kustomizations, err := findKustomizations(root)
	if err != nil {
		t.Fatal(err)
	}
	a := newApplier(t)
	installNamespaces := map[string]installNamespace{}
	for _, k := range kustomizations {
		if filepath.Base(k.path) != "deploy" {
			continue
		}
		objs, err := render(filepath.Join(root, k.path))
		if err != nil {
			continue // reported by its own subtest
		}
		for _, obj := range objs {
			if obj.GetKind() == "Namespace" {
				installNamespaces[obj.GetName()] = installNamespace{provisioner: k.provisioner, obj: obj}
			}
		}
	}
	baseline := baselineRules(t)
	for _, k := range kustomizations {
		t.Run(k.path, func(t *testing.T) {
			ctx := framework.TestContext(t, 2*time.Minute)
			objs, err := render(filepath.Join(root, k.path))
			if err != nil {
				t.Fatalf("kustomize build %s: %v", k.path, err)
			}
			if len(objs) == 0 {
				t.Fatalf("kustomize build %s: no objects", k.path)
			}
			for _, obj := range objs {
				if obj.GetNamespace() == "" && a.namespaced(obj) {
					// What kubectl apply -k does with the default context.
					obj.SetNamespace(metav1.NamespaceDefault)
				}
			}
			// An example goes into the namespace the install created: create
			// the install's namespaces this kustomization uses but lacks.
			for _, ns := range missingNamespaces(ctx, t, objs) {
				if install, ok := installNamespaces[ns]; ok && install.provisioner == k.provisioner {
					a.create(ctx, t, install.obj)
				}
			}
			for _, obj := range sortForApply(objs) {
				if slices.Contains(realKinds, obj.GetKind()) {
					a.create(ctx, t, obj)
				} else {
					a.dryRun(ctx, t, obj)
				}
			}
			workloads, err := findWorkloads(objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range workloads {
				checkImages(t, root, k.provisioner, w)
				checkPermissions(ctx, t, baseline, root, k.provisioner, w)
			}
		})
	}
}

// installNamespace is a Namespace that a provisioner's deploy/ creates.
type installNamespace struct {
	provisioner string
	obj         *unstructured.Unstructured
}

// missingNamespaces are the namespaces objs use that neither exist nor are
// among objs.
func missingNamespaces(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, obj := range objs {
		ns := obj.GetNamespace()
		if ns == "" || slices.Contains(out, ns) || slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "Namespace" && o.GetName() == ns
		}) {
			continue
		}
		_, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, ns)
		case err != nil:
			t.Fatal(err)
		}
	}
	return out
}

// findKustomizations lists every */deploy/ directory with a kustomization
// (components excluded: they do not build alone) and fails for a
// provisioner with a cmd/ but no deploy/kustomization.yaml.
func findKustomizations(root string) ([]kustomization, error) {
	provisioners, missing, err := release.Provisioners(root)
	if err != nil {
		return nil, err
	}
	dirs := missing
	for _, p := range provisioners {
		dirs = append(dirs, p.Dir)
	}
	slices.Sort(dirs)
	var out []kustomization
	var errs []error
	for _, dir := range dirs {
		deploy := filepath.Join(root, dir, "deploy")
		if _, err := os.Stat(filepath.Join(deploy, "kustomization.yaml")); err != nil {
			errs = append(errs, fmt.Errorf("%s has no deploy/kustomization.yaml", dir))
			continue
		}
		err := filepath.WalkDir(deploy, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
				return err
			}
			if component, err := isComponent(path); err != nil || component {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			out = append(out, kustomization{provisioner: dir, path: rel})
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func isComponent(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return head.Kind == "Component", nil
}

// render runs kustomize in-process, as kubectl apply -k does.
func render(dir string) ([]*unstructured.Unstructured, error) {
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

// sortForApply puts realKinds first, in their order, then the rest as given.
func sortForApply(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		if i := slices.Index(realKinds, o.GetKind()); i >= 0 {
			return i
		}
		return len(realKinds)
	}
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return sorted
}

// applier applies objects of any kind through the dynamic client.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t *testing.T) *applier {
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}
}

func (a *applier) mapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the API server does not serve this kind (a missing CRD?): %w", gvk, obj.GetName(), err)
	}
	return m, nil
}

func (a *applier) namespaced(obj *unstructured.Unstructured) bool {
	m, err := a.mapping(obj)
	if err != nil {
		// Reported by the apply that follows.
		return false
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace
}

func (a *applier) client(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := a.mapping(obj)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	c, err := a.client(obj)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = c.Apply(ctx, obj.GetName(), obj, opts)
	return err
}

// dryRun reports an object the API server refuses (validation, admission, a
// missing namespace or kind) without stopping at the first one.
func (a *applier) dryRun(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := a.apply(ctx, obj, true); err != nil {
		t.Errorf("server-side dry-run of %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

// create applies obj for real and deletes it when the test ends (namespaces
// through the framework, which finalizes them: no namespace controller runs).
func (a *applier) create(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := a.apply(ctx, obj, false); err != nil {
		t.Fatalf("applying %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		var err error
		if obj.GetKind() == "Namespace" {
			err = framework.DeleteNamespace(ctx, cp.Client, obj.GetName())
		} else if c, cerr := a.client(obj); cerr != nil {
			err = cerr
		} else if err = c.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			err = nil
		}
		if err != nil {
			t.Errorf("cleanup of %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	})
}

// workload is the pod template of a Deployment, DaemonSet or StatefulSet.
type workload struct {
	kind, namespace, name string
	pod                   corev1.PodTemplateSpec
}

func (w workload) String() string { return w.kind + " " + w.namespace + "/" + w.name }

func findWorkloads(objs []*unstructured.Unstructured) ([]workload, error) {
	var out []workload
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
		out = append(out, workload{kind: obj.GetKind(), namespace: obj.GetNamespace(), name: obj.GetName(), pod: typed.template()})
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

// provisionerContainer is the container running one of the provisioner's
// binaries, from whatever registry.
func provisionerContainer(w workload, binaries []string) (corev1.Container, bool) {
	for _, c := range w.pod.Spec.Containers {
		if slices.ContainsFunc(binaries, func(b string) bool { return imageName(c.Image) == b }) {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// imageName is the last path element of an image reference, without tag or
// digest: ghcr.io/kubeprov/nfs-provisioner:v0.1.0 -> nfs-provisioner.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		ref = ref[i+1:]
	}
	name, _, _ := strings.Cut(ref, ":")
	return name
}

// checkImages: the workload runs ghcr.io/kubeprov/<binary>:<version in
// versions.yaml>, the reference make push produces on release (a user
// changes registry or tag with kustomize's images: field, which this
// rendering already includes).
func checkImages(t *testing.T, root, provisioner string, w workload) {
	t.Helper()
	binaries, err := binariesOf(root, provisioner)
	if err != nil {
		t.Fatal(err)
	}
	version, err := release.Version(root, provisioner)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, b := range binaries {
		want = append(want, imageRepo+b+":"+version)
	}
	found := false
	for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
		switch {
		case slices.Contains(want, c.Image):
			found = true
		case strings.HasPrefix(c.Image, imageRepo) || slices.Contains(binaries, imageName(c.Image)):
			t.Errorf("%s container %s: image %s, want %s (what make push publishes for the version in versions.yaml)", w, c.Name, c.Image, strings.Join(want, " or "))
		}
	}
	if !found {
		t.Errorf("%s runs none of %s", w, strings.Join(want, ", "))
	}
}

// binariesOf lists <dir>/cmd/*: the provisioner's binaries and image names.
func binariesOf(root, dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, dir, "cmd"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
