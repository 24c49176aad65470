// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// TestPermissionCheckFindsProblems proves the RBAC check is not vacuous: a
// ServiceAccount that lacks a permission its code needs, holds a wildcard
// and reads Secrets everywhere gets each of these reported.
func TestPermissionCheckFindsProblems(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	baseline := baselineRules(t)
	ns := cp.CreateTestNamespace(t, "rbac-check")
	const sa = "too-much"
	rbac := cp.Client.RbacV1()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "rbac-check-"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}},
		},
	}
	role, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitUntilAuthorized(ctx, cp.Client, role, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		_ = rbac.ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})

	w := manifests.Workload{Kind: "Deployment", Namespace: ns, Name: "test", Pod: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{ServiceAccountName: sa},
	}}
	perms := []permission{
		{group: "", resource: "persistentvolumes", verbs: []string{"get", "create"}, scope: cluster},
		{group: "", resource: "events", verbs: []string{"create"}, scope: cluster},
		{group: "", resource: "configmaps", verbs: []string{"get"}, scope: own, when: "--journal"},
	}
	problems, err := permissionProblems(ctx, baseline, perms, w, corev1.Container{Args: []string{"--journal"}})
	if err != nil {
		t.Fatal(err)
	}
	report := expectReported(t, problems,
		"cannot create events (cluster-wide)",
		"cannot get configmaps in namespace "+ns,
		"- * persistentvolumes (cluster-wide)",
		"- list secrets (cluster-wide)",
	)
	if strings.Contains(report, "is cluster-admin") {
		t.Errorf("a ServiceAccount without * on * was called cluster-admin:\n%s", report)
	}
}

// expectReported fails the test for each of wants that no problem
// mentions, and returns the problems as one report.
func expectReported(t *testing.T, problems []string, wants ...string) string {
	t.Helper()
	report := strings.Join(problems, "\n")
	for _, want := range wants {
		if !strings.Contains(report, want) {
			t.Errorf("the check did not report %q; it reported:\n%s", want, report)
		}
	}
	return report
}
