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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
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
// server-side dry-run. Then it checks the images of the workloads, the
// permissions of their ServiceAccounts, and the Pod Security of namespaces
// and pods (security_test.go). Kustomizations run one at a time and
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
	client, err := manifests.NewClient(cp)
	if err != nil {
		t.Fatal(err)
	}
	installNamespaces := map[string]installNamespace{}
	for _, k := range kustomizations {
		if filepath.Base(k.path) != "deploy" {
			continue
		}
		objs, err := manifests.Render(filepath.Join(root, k.path))
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
	restricted := restrictedNamespace(t)
	for _, k := range kustomizations {
		t.Run(k.path, func(t *testing.T) {
			ctx := framework.TestContext(t, 2*time.Minute)
			objs, err := manifests.Render(filepath.Join(root, k.path))
			if err != nil {
				t.Fatalf("kustomize build %s: %v", k.path, err)
			}
			if len(objs) == 0 {
				t.Fatalf("kustomize build %s: no objects", k.path)
			}
			for _, obj := range objs {
				if obj.GetNamespace() == "" && namespaced(client, obj) {
					// What kubectl apply -k does with the default context.
					obj.SetNamespace(metav1.NamespaceDefault)
				}
			}
			// An example goes into the namespace the install created: create
			// the install's namespaces this kustomization uses but lacks.
			for _, ns := range missingNamespaces(ctx, t, objs) {
				if install, ok := installNamespaces[ns]; ok && install.provisioner == k.provisioner {
					create(ctx, t, client, install.obj)
				}
			}
			for _, obj := range sortForApply(objs) {
				if slices.Contains(realKinds, obj.GetKind()) {
					create(ctx, t, client, obj)
				} else {
					dryRun(ctx, t, client, obj)
				}
			}
			workloads, err := manifests.Workloads(objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range workloads {
				checkImages(t, root, k.provisioner, w)
				checkPermissions(ctx, t, baseline, root, k.provisioner, w)
			}
			checkPodSecurity(ctx, t, root, k.provisioner, restricted, objs)
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

// namespaced reports whether obj's kind is namespaced.
func namespaced(c *manifests.Client, obj *unstructured.Unstructured) bool {
	m, err := c.Mapping(obj)
	if err != nil {
		// Reported by the apply that follows.
		return false
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace
}

// apply applies obj server-side, as kubectl apply does, or only tries.
func apply(ctx context.Context, c *manifests.Client, obj *unstructured.Unstructured, dryRun bool) error {
	r, err := c.Resource(obj)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = r.Apply(ctx, obj.GetName(), obj, opts)
	return err
}

// dryRun reports an object the API server refuses (validation, admission, a
// missing namespace or kind) without stopping at the first one.
func dryRun(ctx context.Context, t *testing.T, c *manifests.Client, obj *unstructured.Unstructured) {
	t.Helper()
	if err := apply(ctx, c, obj, true); err != nil {
		t.Errorf("server-side dry-run of %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

// create applies obj for real and deletes it when the test ends (namespaces
// through the framework, which finalizes them: no namespace controller runs).
func create(ctx context.Context, t *testing.T, c *manifests.Client, obj *unstructured.Unstructured) {
	t.Helper()
	if err := apply(ctx, c, obj, false); err != nil {
		t.Fatalf("applying %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := c.Delete(ctx, obj); err != nil {
			t.Errorf("cleanup of %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	})
}

// provisionerContainer is the container running one of the provisioner's
// binaries, from whatever registry.
func provisionerContainer(w manifests.Workload, binaries []string) (corev1.Container, bool) {
	for _, c := range w.Pod.Spec.Containers {
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
func checkImages(t *testing.T, root, provisioner string, w manifests.Workload) {
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
	for _, c := range slices.Concat(w.Pod.Spec.InitContainers, w.Pod.Spec.Containers) {
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
