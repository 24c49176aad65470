// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeprov/external-storage/test/framework"
)

// The audit of refusals (Forbidden, ExpectNoForbidden) counts what RBAC
// refuses a ServiceAccount, and not an event it cannot record because the
// namespace is being deleted: a provisioner gets that answer when a
// claim's namespace goes away, and its RBAC lacks nothing.
func TestForbiddenCountsRBACNotTerminatingNamespace(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	ns := cp.CreateTestNamespace(t, "audit")
	user := "system:serviceaccount:" + ns + ":recorder"
	// The account may create events in ns, and nothing else.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "recorder"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "recorder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "recorder"}}}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitUntilAuthorized(ctx, cp.Client, role, binding); err != nil {
		t.Fatal(err)
	}
	cfg := cp.RestConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	recorder := kubernetes.NewForConfigOrDie(cfg)

	// RBAC refuses it a ConfigMap.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}}
	if _, err := recorder.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("creating a ConfigMap without RBAC for it: %v, want 403", err)
	}
	// The namespace is deleted and stays Terminating (no namespace
	// controller runs to empty it); once the NamespaceLifecycle admission
	// has seen that, it refuses the event.
	if err := cp.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var refusal error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, framework.InformerLagTimeout, true, func(ctx context.Context) (bool, error) {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "claim."},
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "claim"},
			Reason:         "ProvisioningSucceeded", Message: "a provisioner's event", Type: corev1.EventTypeNormal}
		_, refusal = recorder.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
		return refusal != nil, nil
	}); err != nil || !apierrors.IsForbidden(refusal) || !strings.Contains(refusal.Error(), "being terminated") {
		t.Fatalf("creating an event in the terminating namespace: %v (%v), want 403 being terminated", refusal, err)
	}

	events, err := cp.AuditEvents(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e framework.AuditEvent) bool {
		return e.Verb == "create" && strings.HasSuffix(e.RequestURI, "/namespaces/"+ns+"/events") && e.RefusedInTerminatingNamespace()
	}) {
		t.Errorf("the audit log has no refused event create recognized as the terminating namespace's: %v", events)
	}
	refused, err := cp.Forbidden(ctx, func(username string) bool { return username == user })
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0].Verb != "create" || !strings.HasSuffix(refused[0].RequestURI, "/namespaces/"+ns+"/configmaps") {
		t.Errorf("Forbidden = %v, want only the ConfigMap's create that RBAC refused", refused)
	}
}
