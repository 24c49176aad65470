// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// pairing is a chart, with the values that select one of its modes, and
// the kustomize deploy it must render the same as.
type pairing struct {
	chart     string         // directory under charts/
	values    map[string]any // only what selects the mode, or is required
	kustomize string         // relative to the root
}

func (p pairing) String() string { return p.chart + "=" + p.kustomize }

var pairings = []pairing{
	{chart: "hostpath", kustomize: "hostpath/deploy"},
	{chart: "hostpath", values: map[string]any{"mode": "single-node"}, kustomize: "hostpath/deploy/single-node"},
	{chart: "hostpath", values: map[string]any{"mode": "helper-pods"}, kustomize: "hostpath/deploy/helper-pods"},
	{chart: "hostpath", values: map[string]any{"capacity": map[string]any{"enabled": true}, "provisionerName": "hostpath.kubeprov.io"}, kustomize: "hostpath/deploy/capacity"},
	{chart: "csi", kustomize: "csi/deploy"},
	{chart: "csi", values: map[string]any{"mode": "node"}, kustomize: "csi/deploy/node-deployment"},
	{chart: "cinder", kustomize: "cinder/deploy"},
	{chart: "flex", kustomize: "flex/deploy"},
	{chart: "nfs", kustomize: "nfs/deploy/server"},
	// nfs.server has no default: it is the user's server. These are the
	// placeholders nfs/deploy/subdir has.
	{chart: "nfs-subdir", values: map[string]any{"nfs": map[string]any{"server": "nfs.example.com", "path": "/srv/kubernetes"}}, kustomize: "nfs/deploy/subdir"},
}

// TestChartsMatchKustomize renders each chart with its default values and
// the kustomize deploy it stands for, and compares what users get: the
// same kinds of objects (less the Namespace, which is Helm's to create);
// the same permissions for the workload's ServiceAccount, cluster-wide and
// per namespace, as sets of single grants, so that how rules are grouped
// does not matter; and the same workload, Service, StorageClass and Secret
// specs, names of the release's own objects aside.
func TestChartsMatchKustomize(t *testing.T) {
	root := repoRoot(t)
	for _, p := range pairings {
		t.Run(p.String(), func(t *testing.T) {
			kustomized, err := manifests.Render(filepath.Join(root, p.kustomize))
			if err != nil {
				t.Fatalf("kustomize build %s: %v", p.kustomize, err)
			}
			kw := onlyWorkload(t, kustomized)
			namespace := kw.GetNamespace()
			ch := loadChart(t, p.chart)
			// The release named as the chart: the release's objects are
			// then named as the chart, as most kustomize objects are.
			rendered := mustRender(t, ch, ch.Name(), namespace, p.values)
			hw := onlyWorkload(t, rendered)

			wantKinds := slices.DeleteFunc(kinds(kustomized), func(k string) bool { return k == "Namespace" })
			if got := kinds(rendered); !slices.Equal(got, wantKinds) {
				t.Errorf("chart renders kinds %v, kustomize %v", got, wantKinds)
			}
			if hw.GetNamespace() != namespace {
				t.Errorf("chart's %s is in namespace %q, want the release namespace %q", hw.GetKind(), hw.GetNamespace(), namespace)
			}

			kSA, hSA := serviceAccountOf(t, kw), serviceAccountOf(t, hw)
			if len(ofKind(rendered, "ServiceAccount")) != 1 || ofKind(rendered, "ServiceAccount")[0].GetName() != hSA {
				t.Errorf("chart's pods run as ServiceAccount %s, which the chart does not create", hSA)
			}
			kPerms, hPerms := permissions(t, kustomized, namespace, kSA), permissions(t, rendered, namespace, hSA)
			for _, scope := range union(keys(kPerms), keys(hPerms)) {
				missing, extra := diff(kPerms[scope], hPerms[scope])
				for _, g := range missing {
					t.Errorf("%s: the chart does not grant %s, which kustomize does", scope, g)
				}
				for _, g := range extra {
					t.Errorf("%s: the chart grants %s, which kustomize does not", scope, g)
				}
			}
			if len(kPerms[clusterScope]) == 0 || len(kPerms[namespace]) == 0 {
				t.Errorf("kustomize grants nothing (cluster %d, namespace %d grants): the comparison is void", len(kPerms[clusterScope]), len(kPerms[namespace]))
			}

			for _, kind := range []string{"Deployment", "DaemonSet", "StatefulSet", "Service", "StorageClass", "Secret"} {
				ks, hs := ofKind(kustomized, kind), ofKind(rendered, kind)
				if len(ks) != len(hs) {
					continue // reported by the kinds check, or a count below
				}
				if len(ks) > 1 {
					t.Fatalf("%d objects of kind %s: pair them by name first", len(ks), kind)
				}
				if len(ks) == 0 {
					continue
				}
				want, got := comparableObject(t, ks[0], kustomized), comparableObject(t, hs[0], rendered)
				if !apiequality.Semantic.DeepEqual(want, got) {
					t.Errorf("%s differs from kustomize's (names of the release's own objects aside)\nkustomize:\n%s\nchart:\n%s", kind, toYAML(t, want), toYAML(t, got))
				}
			}
		})
	}
}

// onlyWorkload is the one Deployment, DaemonSet or StatefulSet of objs.
func onlyWorkload(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ws := ofKind(objs, "Deployment", "DaemonSet", "StatefulSet")
	if len(ws) != 1 {
		t.Fatalf("%d workloads, want 1", len(ws))
	}
	return ws[0]
}

// serviceAccountOf is the ServiceAccount the workload's pods run as.
func serviceAccountOf(t *testing.T, obj *unstructured.Unstructured) string {
	t.Helper()
	ws, err := manifests.Workloads([]*unstructured.Unstructured{obj})
	if err != nil {
		t.Fatal(err)
	}
	return ws[0].Pod.Spec.ServiceAccountName
}

// clusterScope keys the cluster-wide grants in permissions' answer.
const clusterScope = "cluster-wide"

// permissions are the single grants (group, resource, verb, object name)
// that the RBAC objects among objs give ServiceAccount namespace/name:
// cluster-wide through ClusterRoleBindings, and per namespace through
// RoleBindings.
func permissions(t *testing.T, objs []*unstructured.Unstructured, namespace, name string) map[string][]grant {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	for _, obj := range ofKind(objs, "ClusterRole", "Role") {
		var r rbacv1.Role // ClusterRole has the same rules field
		fromUnstructured(t, obj, &r)
		if obj.GetKind() == "ClusterRole" {
			clusterRoles[obj.GetName()] = r.Rules
		} else {
			roles[obj.GetNamespace()+"/"+obj.GetName()] = r.Rules
		}
	}
	out := map[string][]grant{}
	for _, obj := range ofKind(objs, "ClusterRoleBinding", "RoleBinding") {
		var b rbacv1.RoleBinding
		fromUnstructured(t, obj, &b)
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name
		}) {
			continue
		}
		scope, rules := clusterScope, clusterRoles[b.RoleRef.Name]
		switch {
		case obj.GetKind() == "RoleBinding" && b.RoleRef.Kind == "Role":
			scope, rules = obj.GetNamespace(), roles[obj.GetNamespace()+"/"+b.RoleRef.Name]
		case obj.GetKind() == "RoleBinding":
			scope = obj.GetNamespace()
		}
		if rules == nil {
			t.Errorf("%s %s binds %s %s, which is not rendered (or has no rules)", obj.GetKind(), obj.GetName(), b.RoleRef.Kind, b.RoleRef.Name)
		}
		out[scope] = union(out[scope], grants(rules))
	}
	return out
}

// grant is one verb on one resource (and object name, * for any).
type grant struct{ verb, group, resource, name string }

func (g grant) String() string {
	return fmt.Sprintf("%s %s/%s (name %s)", g.verb, g.group, g.resource, g.name)
}

// grants spells each rule out into its single grants.
func grants(rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, grant{verb: v, group: g, resource: res, name: n})
					}
				}
			}
		}
	}
	return out
}

// comparableObject is obj, typed, with what may differ between a release and the
// kustomize deploy cleared: object metadata (names, labels), label
// selectors, the ServiceAccount name (compared through permissions) and the
// names of Secrets the rendering itself holds. What one side leaves to the
// API server's defaults gets them: a tagged image's imagePullPolicy, a
// class's binding mode and reclaim policy.
func comparableObject(t *testing.T, obj *unstructured.Unstructured, all []*unstructured.Unstructured) runtime.Object {
	t.Helper()
	own := func(name string) bool {
		return slices.ContainsFunc(ofKind(all, "Secret"), func(s *unstructured.Unstructured) bool { return s.GetName() == name })
	}
	pod := func(spec *corev1.PodTemplateSpec) {
		spec.ObjectMeta = metav1.ObjectMeta{}
		spec.Spec.ServiceAccountName = ""
		for i := range spec.Spec.Volumes {
			if s := spec.Spec.Volumes[i].Secret; s != nil && own(s.SecretName) {
				s.SecretName = "<the release's>"
			}
		}
		for _, cs := range [][]corev1.Container{spec.Spec.InitContainers, spec.Spec.Containers} {
			for i := range cs {
				if cs[i].ImagePullPolicy == "" && !strings.HasSuffix(cs[i].Image, ":latest") {
					cs[i].ImagePullPolicy = corev1.PullIfNotPresent
				}
			}
		}
	}
	switch obj.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		fromUnstructured(t, obj, &d)
		d.ObjectMeta, d.Spec.Selector = metav1.ObjectMeta{}, nil
		pod(&d.Spec.Template)
		return &d
	case "DaemonSet":
		var d appsv1.DaemonSet
		fromUnstructured(t, obj, &d)
		d.ObjectMeta, d.Spec.Selector = metav1.ObjectMeta{}, nil
		pod(&d.Spec.Template)
		return &d
	case "StatefulSet":
		var s appsv1.StatefulSet
		fromUnstructured(t, obj, &s)
		s.ObjectMeta, s.Spec.Selector = metav1.ObjectMeta{}, nil
		pod(&s.Spec.Template)
		return &s
	case "Service":
		var s corev1.Service
		fromUnstructured(t, obj, &s)
		s.ObjectMeta, s.Spec.Selector = metav1.ObjectMeta{}, nil
		return &s
	case "StorageClass":
		var sc storagev1.StorageClass
		fromUnstructured(t, obj, &sc)
		sc.ObjectMeta = metav1.ObjectMeta{Name: sc.Name, Annotations: sc.Annotations}
		// The API server's defaults.
		if sc.VolumeBindingMode == nil {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
		}
		if sc.ReclaimPolicy == nil {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
		}
		return &sc
	case "Secret":
		var s corev1.Secret
		fromUnstructured(t, obj, &s)
		s.ObjectMeta = metav1.ObjectMeta{}
		return &s
	}
	t.Fatalf("no comparison for kind %s", obj.GetKind())
	return nil
}

func fromUnstructured(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

func toYAML(t *testing.T, obj any) string {
	t.Helper()
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// union is a and b as a set, sorted by how they print.
func union[T comparable](a, b []T) []T {
	out := slices.Concat(a, b)
	slices.SortFunc(out, func(x, y T) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
	return slices.Compact(out)
}

// diff is what want has and got lacks, and what got has and want lacks.
func diff[T comparable](want, got []T) (missing, extra []T) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	return missing, extra
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
