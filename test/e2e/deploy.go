// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e installs each provisioner as its README tells users (its
// image pushed with make push, its kustomization applied with only the
// image overridden) on a cluster with real nodes (package cluster), and
// checks what users observe: claims bound, pods writing into their volumes,
// the data on the node, everything gone after deletion. Charts under charts/
// are installed the same way, rendered with Helm's engine (package
// framework/helm) into namespaces named chartNamespacePrefix*.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// pushTag is the tag e2e images are pushed with.
const pushTag = "e2e"

// PushImage runs make push in the provisioner's directory, as a release
// does, into the cluster's registry, for this machine's platform only. It
// returns the reference pushed.
func PushImage(ctx context.Context, c *cluster.Cluster, module string) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	args := []string{"--no-print-directory", "-C", filepath.Join(root, module),
		"REGISTRY=" + c.Registry + "/kubeprov", "TAG=" + pushTag, "PLATFORMS=linux/amd64"}
	ref, err := exec.CommandContext(ctx, "make", append(args, "image-ref")...).Output()
	if err != nil {
		return "", fmt.Errorf("make image-ref in %s: %w", module, err)
	}
	if out, err := exec.CommandContext(ctx, "make", append(args, "push")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("make push in %s: %w\n%s", module, err, out)
	}
	return strings.TrimSpace(string(ref)), nil
}

// ImageOverride is a kustomize images: entry.
type ImageOverride struct{ Name, NewRef string }

// Render builds the kustomization at <repo>/<dir> as a user's own
// kustomization would use it: as its only resource, with images: entries
// replacing image references and nothing else.
func Render(dir string, images ...ImageOverride) ([]*unstructured.Unstructured, error) {
	return RenderOverlay(dir, Overlay{Images: images})
}

// Overlay is what a user's own kustomization adds to one of deploy/:
// images: entries, and patches: such as the README asks for (subdir mode's
// server and path).
type Overlay struct {
	Images []ImageOverride
	// Patches are strategic merge patches (whole objects naming their
	// target by kind, name and namespace).
	Patches []string
	// Components are kustomize components, relative to the repository's
	// root (hostpath/deploy/components/capacity).
	Components []string
}

// RenderOverlay builds the kustomization at <repo>/<dir> as the only
// resource of a user's kustomization holding o.
func RenderOverlay(dir string, o Overlay) ([]*unstructured.Unstructured, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	components := make([]string, len(o.Components))
	for i, comp := range o.Components {
		components[i] = filepath.Join(root, comp)
	}
	o.Components = components
	return kustomize(filepath.Join(root, dir), nil, o)
}

// PostRender is helm install --post-renderer with a kustomization: objs,
// what the chart rendered, are its only resource, o its images: and
// patches: (the usual way to change what a chart has no value for).
func PostRender(objs []*unstructured.Unstructured, o Overlay) ([]*unstructured.Unstructured, error) {
	return kustomize("", objs, o)
}

// kustomize builds, in a temporary directory, a kustomization holding o
// whose only resource is the directory dir or, if dir is empty, a file of
// objs.
func kustomize(dir string, objs []*unstructured.Unstructured, o Overlay) ([]*unstructured.Unstructured, error) {
	tmp, err := os.MkdirTemp("", "kubeprov-e2e-kustomization-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	resource := "rendered.yaml"
	if dir != "" {
		if resource, err = filepath.Rel(tmp, dir); err != nil {
			return nil, err
		}
	} else {
		var docs []byte
		for _, obj := range objs {
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				return nil, err
			}
			docs = append(append(docs, "---\n"...), data...)
		}
		if err := os.WriteFile(filepath.Join(tmp, resource), docs, 0o644); err != nil {
			return nil, err
		}
	}
	type image struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	}
	type patch struct {
		Patch string `json:"patch"`
	}
	k := struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []image  `json:"images,omitempty"`
		Patches    []patch  `json:"patches,omitempty"`
		Components []string `json:"components,omitempty"`
	}{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization", Resources: []string{resource}}
	for _, comp := range o.Components {
		rel, err := filepath.Rel(tmp, comp)
		if err != nil {
			return nil, err
		}
		k.Components = append(k.Components, rel)
	}
	for _, img := range o.Images {
		newName, tag := splitImageRef(img.NewRef)
		k.Images = append(k.Images, image{Name: img.Name, NewName: newName, NewTag: tag})
	}
	for _, p := range o.Patches {
		k.Patches = append(k.Patches, patch{Patch: p})
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), data, 0o644); err != nil {
		return nil, err
	}
	return manifests.Render(tmp)
}

// splitImageRef splits an image reference <repository>:<tag> (the
// repository may name a registry with a port).
func splitImageRef(ref string) (repository, tag string) {
	slash := strings.LastIndex(ref, "/") + 1
	name, tag, _ := strings.Cut(ref[slash:], ":")
	return ref[:slash] + name, tag
}

// Apply creates objs in their order (kustomize puts namespaces and RBAC
// first), as kubectl apply does on an empty cluster, except that before
// the first workload it waits until the authorizer grants what the RBAC
// created so far grants: the workload's pods would otherwise be refused
// (403) for a moment, which the audit of refusals
// (CheckProvisionersNeverForbidden) counts.
func Apply(ctx context.Context, mc *manifests.Client, objs []*unstructured.Unstructured) error {
	authorized := false
	for i, obj := range objs {
		if !authorized && slices.Contains(workloadKinds, obj.GetKind()) {
			if err := mc.WaitUntilAuthorized(ctx, objs[:i]); err != nil {
				return err
			}
			authorized = true
		}
		r, err := mc.Resource(obj)
		if err != nil {
			return err
		}
		if _, err := r.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// Remove deletes objs in reverse order, as kubectl delete does, except
// that it waits until each workload's pods are gone (foreground deletion)
// before it deletes anything else: a provisioner's last requests, those of
// its graceful stop, are made with its RBAC still in place.
func Remove(ctx context.Context, mc *manifests.Client, objs []*unstructured.Unstructured) error {
	for _, obj := range slices.Backward(objs) {
		var err error
		if slices.Contains(workloadKinds, obj.GetKind()) {
			err = deleteAndWait(ctx, mc, obj)
		} else {
			err = mc.Delete(ctx, obj)
		}
		if err != nil {
			return fmt.Errorf("deleting %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// workloadKinds are the kinds whose pods Remove waits for.
var workloadKinds = []string{"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "Pod"}

// deleteAndWait deletes obj with foreground propagation and waits until it
// is gone: the garbage collector removes it only after its dependents, so a
// workload is gone once its pods have stopped.
func deleteAndWait(ctx context.Context, mc *manifests.Client, obj *unstructured.Unstructured) error {
	r, err := mc.Resource(obj)
	if err != nil {
		return err
	}
	err = r.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, removeTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// removeTimeout bounds the wait for a workload's pods: their grace period
// (30 s by default) and a little more.
const removeTimeout = 2 * time.Minute
