// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// TestInstall installs each chart, in each mode, as helm install does into
// a fresh namespace: every rendered object is created on the real API
// server with strict field validation (an unknown or misspelled field is an
// error, not silently dropped). Then the API server's own RBAC authorizer
// is asked, for every grant the chart means to give, whether the release's
// ServiceAccount has it, and that it has no more than that (one sample of
// what no provisioner needs).
func TestInstall(t *testing.T) {
	client, err := manifests.NewClient(cp)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pairings {
		t.Run(p.String(), func(t *testing.T) {
			ctx := framework.TestContext(t, 2*time.Minute)
			ns := cp.CreateTestNamespace(t, "chart")
			ch := loadChart(t, p.chart)
			// Cluster-scoped names are the release's: one of its own per
			// install, the class too.
			releaseName := fmt.Sprintf("r%d", i)
			// The charts whose kustomize deploy has no class have it off.
			values := with(p.values, map[string]any{"storageClass": map[string]any{"name": ns, "create": true}})
			if p.chart == "csi" {
				values["driver"] = map[string]any{"name": "example.csi.k8s.io"}
			}
			objs := mustRender(t, ch, releaseName, ns, values)
			for _, obj := range objs {
				r, err := client.Resource(obj)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
					t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
				if obj.GetNamespace() == "" {
					t.Cleanup(func() {
						ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
						defer cancel()
						if err := client.Delete(ctx, obj); err != nil {
							t.Errorf("cleanup: %v", err)
						}
					})
				}
			}
			if len(ofKind(objs, "StorageClass")) != 1 {
				t.Errorf("%d StorageClasses installed, want 1", len(ofKind(objs, "StorageClass")))
			}

			sa := serviceAccountOf(t, onlyWorkload(t, objs))
			user := "system:serviceaccount:" + ns + ":" + sa
			perms := permissions(t, objs, ns, sa)
			if len(perms) == 0 {
				t.Fatal("the release grants its ServiceAccount nothing")
			}
			for scope, gs := range perms {
				for _, g := range gs {
					attrs := &authorizationv1.ResourceAttributes{Verb: g.verb, Group: g.group, Resource: g.resource}
					if scope != clusterScope {
						attrs.Namespace = scope
					}
					if g.name != "*" {
						attrs.Name = g.name
					}
					if !allowed(ctx, t, user, attrs) {
						t.Errorf("%s: the API server does not let %s %s", scope, user, g)
					}
				}
			}
			if allowed(ctx, t, user, &authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}) {
				t.Errorf("%s may list Secrets cluster-wide", user)
			}
		})
	}
}

// allowed asks the API server's authorizer whether user may do attrs.
func allowed(ctx context.Context, t *testing.T, user string, attrs *authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}
