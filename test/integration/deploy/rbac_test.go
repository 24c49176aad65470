// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// otherNamespace is a namespace no manifest uses: what a ServiceAccount may
// do there, it may do in every namespace.
const otherNamespace = "kubeprov-deploy-elsewhere"

// identity is how the API server sees a pod's ServiceAccount.
type identity struct {
	namespace, name string
}

func (id identity) user() string { return "system:serviceaccount:" + id.namespace + ":" + id.name }

func (id identity) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + id.namespace, "system:authenticated"}
}

func (id identity) String() string { return "ServiceAccount " + id.namespace + "/" + id.name }

// access is one verb on one kind of object (or one named object, or one
// non-resource URL), as the API server's rules review lists them.
type access struct {
	group, resource, verb, name string
	url                         string // non-resource rules only
}

func (a access) String() string {
	if a.url != "" {
		return a.verb + " " + a.url
	}
	s := a.verb + " " + a.resource
	if a.group != "" {
		s += "." + a.group
	}
	if a.name != "" {
		s += " named " + a.name
	}
	return s
}

// baselineRules are what any ServiceAccount may do without a binding of
// its own (system:basic-user, system:discovery, ...), asked before any
// manifest is applied, so that what the manifests grant stands out.
func baselineRules(t *testing.T) map[access]bool {
	t.Helper()
	nobody := identity{namespace: "kubeprov-deploy-baseline", name: "nobody"}
	rules, err := rulesReview(t.Context(), nobody, otherNamespace)
	if err != nil {
		t.Fatal(err)
	}
	set := map[access]bool{}
	for _, r := range rules {
		set[r] = true
	}
	return set
}

// rulesReview asks the API server, as id, what id may do in namespace
// (cluster-wide rules included).
func rulesReview(ctx context.Context, id identity, namespace string) ([]access, error) {
	cfg := cp.RestConfig()
	cfg.Impersonate.UserName = id.user()
	cfg.Impersonate.Groups = id.groups()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	review, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("rules review of %s in namespace %s: %w", id, namespace, err)
	}
	if review.Status.Incomplete {
		return nil, fmt.Errorf("rules review of %s in namespace %s is incomplete: %s", id, namespace, review.Status.EvaluationError)
	}
	var out []access
	for _, r := range review.Status.ResourceRules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, access{group: g, resource: res, verb: v, name: n})
					}
				}
			}
		}
	}
	for _, r := range review.Status.NonResourceRules {
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, access{url: u, verb: v})
			}
		}
	}
	return out, nil
}

// can asks the API server (SubjectAccessReview) whether id may do verb on
// resource ("pods" or "pods/log") in namespace ("" for all namespaces or a
// cluster-scoped kind).
func can(ctx context.Context, id identity, group, resource, verb, namespace, name string) (bool, error) {
	res, sub, _ := strings.Cut(resource, "/")
	review, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   id.user(),
			Groups: id.groups(),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// checkPermissions: the workload's ServiceAccount can do everything its
// code calls (the table in permissions_test.go) and nothing else, in its
// own namespace or any other.
func checkPermissions(ctx context.Context, t *testing.T, baseline map[access]bool, root, provisioner string, w manifests.Workload) {
	t.Helper()
	extra, ok := permissions[provisioner]
	if !ok {
		t.Errorf("no permission table for %s in permissions_test.go: read its code and add what it calls", provisioner)
		return
	}
	binaries, err := binariesOf(root, provisioner)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := provisionerContainer(w, binaries)
	if !ok {
		t.Errorf("%s has no container running %v: cannot tell which permissions it needs", w, binaries)
		return
	}
	problems, err := permissionProblems(ctx, baseline, slices.Concat(libPermissions, extra), w, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// permissionProblems compares what the API server lets the workload's
// ServiceAccount do with perms, for container c.
func permissionProblems(ctx context.Context, baseline map[access]bool, perms []permission, w manifests.Workload, c corev1.Container) ([]string, error) {
	id := identity{namespace: w.Namespace, name: w.Pod.Spec.ServiceAccountName}
	if id.name == "" {
		id.name = "default"
	}
	var problems []string
	for _, p := range perms {
		if !required(p, c) {
			continue
		}
		namespace := ""
		if p.scope == own {
			namespace = w.Namespace
		}
		names := p.names
		if p.nameFlag != "" {
			v, _ := flagValue(c, p.nameFlag)
			names = []string{v}
		}
		if len(names) == 0 {
			names = []string{""}
		}
		for _, verb := range p.verbs {
			for _, name := range names {
				ok, err := can(ctx, id, p.group, p.resource, verb, namespace, name)
				if err != nil {
					return nil, err
				}
				if !ok {
					want := access{group: p.group, resource: p.resource, verb: verb, name: name}
					problems = append(problems, fmt.Sprintf("%s (%s) cannot %s%s, which its code needs: %s", id, w, want, scopeText(namespace), p.why))
				}
			}
		}
	}

	admin, err := can(ctx, id, "*", "*", "*", "", "")
	if err != nil {
		return nil, err
	}
	if admin {
		problems = append(problems, fmt.Sprintf("%s (%s) is cluster-admin", id, w))
	}

	// What the API server says the ServiceAccount may do here and elsewhere;
	// a cluster-wide grant shows in both and is reported once.
	where := map[access]string{}
	var order []access
	for _, ns := range []string{otherNamespace, w.Namespace} {
		rules, err := rulesReview(ctx, id, ns)
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			if baseline[r] || allowed(perms, c, r, ns == w.Namespace) {
				continue
			}
			if _, seen := where[r]; !seen {
				order = append(order, r)
				where[r] = "cluster-wide"
				if ns == w.Namespace {
					where[r] = "in namespace " + ns
				}
			}
		}
	}
	if len(order) > 0 {
		var lines []string
		for _, r := range order {
			lines = append(lines, fmt.Sprintf("  - %s (%s)", r, where[r]))
		}
		problems = append(problems, fmt.Sprintf("%s (%s) may do more than its code does; remove from its RBAC (or, if new code needs it, add it to permissions_test.go):\n%s",
			id, w, strings.Join(lines, "\n")))
	}
	return problems, nil
}

func scopeText(namespace string) string {
	if namespace == "" {
		return " (cluster-wide)"
	}
	return " in namespace " + namespace
}

// required: the code needs p with this container's flags.
func required(p permission, c corev1.Container) bool {
	if p.optional || (p.when != "" && !flagSet(c, p.when)) {
		return false
	}
	return p.unless == "" || !flagSet(c, p.unless)
}

// allowed: some permission covers r, never a wildcard, never broader than
// the names the code uses, and own-namespace permissions only there.
func allowed(perms []permission, c corev1.Container, r access, inOwnNamespace bool) bool {
	if r.url != "" || r.verb == "*" || r.resource == "*" || r.group == "*" || strings.HasSuffix(r.resource, "/*") {
		return false
	}
	for _, p := range perms {
		if p.group != r.group || p.resource != r.resource || !slices.Contains(p.verbs, r.verb) {
			continue
		}
		if p.scope == own && !inOwnNamespace {
			continue
		}
		names := p.names
		if p.nameFlag != "" {
			if v, ok := flagValue(c, p.nameFlag); ok {
				names = []string{v}
			}
		}
		if len(names) == 0 || (r.name != "" && slices.Contains(names, r.name)) {
			return true
		}
	}
	return false
}

// flagSet: spec is "--flag" (set and not false) or "--flag=value".
func flagSet(c corev1.Container, spec string) bool {
	flag, want, hasWant := strings.Cut(spec, "=")
	v, ok := flagValue(c, flag)
	if !ok {
		return false
	}
	if hasWant {
		return v == want
	}
	return v != "false"
}

// flagValue finds a flag in the container's args ("--f", "--f=v", "--f v")
// or in its environment (every flag is also an environment variable: --f-g
// is F_G; a value from the downward API counts as set, with value "").
func flagValue(c corev1.Container, flag string) (string, bool) {
	args := slices.Concat(c.Command, c.Args)
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
		if a == flag {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				return args[i+1], true
			}
			return "true", true
		}
	}
	env := strings.ToUpper(strings.ReplaceAll(strings.TrimLeft(flag, "-"), "-", "_"))
	for _, e := range c.Env {
		if e.Name == env {
			return e.Value, true
		}
	}
	return "", false
}
