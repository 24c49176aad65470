// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// InformerLagTimeout bounds the wait for kube-apiserver's own informers to
// see an object a test has just created (WaitUntilAdmitted,
// WaitUntilAuthorized). They see it within milliseconds on an idle machine;
// the bound is for a machine whose cores are all busy.
const InformerLagTimeout = 30 * time.Second

// WaitUntilAdmitted waits until kube-apiserver's admission accepts a create
// that depends on objects the test has just created. Some admission plugins
// read those objects only from an informer: the Priority plugin refuses a
// pod naming a PriorityClass its informer has not seen yet ("no
// PriorityClass with name ... was found", 403), for a moment after the
// PriorityClass's create returned; a user applying both at once sees the
// same. (The ServiceAccount, LimitRanger and ResourceQuota plugins look up
// the API when their informer misses, so they need no wait.)
//
// dryRunCreate is called with DryRun=All, which runs every admission plugin
// and stores nothing, until it succeeds, as long as it fails with 403
// Forbidden: what an admission plugin answers for a missing dependency.
// Any other error is returned at once, the last 403 after
// InformerLagTimeout. Call it right before the real create (or before the
// provisioner creates such objects): once an informer has seen an object,
// it keeps it.
func WaitUntilAdmitted(ctx context.Context, what string, dryRunCreate func(context.Context, metav1.CreateOptions) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, InformerLagTimeout, true, func(ctx context.Context) (bool, error) {
		last = dryRunCreate(ctx, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if last == nil {
			return true, nil
		}
		return false, ignoreForbidden(last)
	})
	if err != nil {
		if last != nil && !errors.Is(err, last) {
			err = fmt.Errorf("%w (last answer: %w)", err, last)
		}
		return fmt.Errorf("waiting until admission accepts %s: %w", what, err)
	}
	return nil
}

func ignoreForbidden(err error) error {
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

// WaitUntilAuthorized waits until kube-apiserver's authorizer grants what
// the RBAC bindings among objs grant: the RBAC authorizer reads Roles,
// ClusterRoles and their bindings from informers, so a subject that acts
// right after its binding was created may be refused (403), which fails
// tests that check the audit log for refusals (ExpectNoForbidden). For each
// subject of each RoleBinding and ClusterRoleBinding it asks, by
// SubjectAccessReview (answered by the same authorizer), for the first
// verb, API group, resource (or non-resource URL) of each rule of the
// bound role, until every answer is allowed or InformerLagTimeout passes.
// The bound role is taken from objs if it is there, else read from the API.
// Roles whose rules a controller fills in (aggregated ClusterRoles, which
// no controller here fills) give nothing to ask.
func WaitUntilAuthorized(ctx context.Context, c kubernetes.Interface, objs ...runtime.Object) error {
	var reviews []authorizationv1.SubjectAccessReviewSpec
	for _, obj := range objs {
		var namespace string
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch b := obj.(type) {
		case *rbacv1.RoleBinding:
			namespace, ref, subjects = b.Namespace, b.RoleRef, b.Subjects
		case *rbacv1.ClusterRoleBinding:
			ref, subjects = b.RoleRef, b.Subjects
		default:
			continue
		}
		rules, err := boundRules(ctx, c, objs, namespace, ref)
		if err != nil {
			return err
		}
		for _, s := range subjects {
			for _, rule := range rules {
				if spec, ok := accessReview(s, namespace, rule); ok {
					reviews = append(reviews, spec)
				}
			}
		}
	}
	var denied string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, InformerLagTimeout, true, func(ctx context.Context) (bool, error) {
		for len(reviews) > 0 {
			review, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx,
				&authorizationv1.SubjectAccessReview{Spec: reviews[0]}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			if !review.Status.Allowed {
				denied = fmt.Sprintf("%+v: %s", reviews[0], review.Status.Reason)
				return false, nil
			}
			reviews = reviews[1:]
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until the authorizer grants what the RBAC bindings grant (still denied: %s): %w", denied, err)
	}
	return nil
}

// boundRules are the rules of the role ref names, from objs or the API.
func boundRules(ctx context.Context, c kubernetes.Interface, objs []runtime.Object, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	for _, obj := range objs {
		switch r := obj.(type) {
		case *rbacv1.ClusterRole:
			if ref.Kind == "ClusterRole" && r.Name == ref.Name {
				return r.Rules, nil
			}
		case *rbacv1.Role:
			if ref.Kind == "Role" && r.Name == ref.Name && r.Namespace == namespace {
				return r.Rules, nil
			}
		}
	}
	if ref.Kind == "Role" {
		role, err := c.RbacV1().Roles(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the Role %s/%s a binding names: %w", namespace, ref.Name, err)
		}
		return role.Rules, nil
	}
	role, err := c.RbacV1().ClusterRoles().Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the ClusterRole %s a binding names: %w", ref.Name, err)
	}
	return role.Rules, nil
}

// accessReview asks whether subject s may do one thing rule allows, in
// namespace ("" for a ClusterRoleBinding: cluster-wide).
func accessReview(s rbacv1.Subject, namespace string, rule rbacv1.PolicyRule) (authorizationv1.SubjectAccessReviewSpec, bool) {
	var spec authorizationv1.SubjectAccessReviewSpec
	switch s.Kind {
	case rbacv1.UserKind:
		spec.User = s.Name
	case rbacv1.GroupKind:
		spec.User, spec.Groups = "kubeprov:authorization-probe", []string{s.Name}
	case rbacv1.ServiceAccountKind:
		spec.User = "system:serviceaccount:" + s.Namespace + ":" + s.Name
		spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
	default:
		return spec, false
	}
	if len(rule.Verbs) == 0 {
		return spec, false
	}
	if len(rule.NonResourceURLs) > 0 {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: rule.NonResourceURLs[0], Verb: rule.Verbs[0]}
		return spec, true
	}
	if len(rule.APIGroups) == 0 || len(rule.Resources) == 0 {
		return spec, false
	}
	resource, subresource, _ := strings.Cut(rule.Resources[0], "/")
	attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: rule.Verbs[0], Group: rule.APIGroups[0],
		Resource: resource, Subresource: subresource}
	if len(rule.ResourceNames) > 0 {
		attrs.Name = rule.ResourceNames[0]
	}
	spec.ResourceAttributes = attrs
	return spec, true
}

// WaitUntilPodAdmitted is WaitUntilAdmitted for the create of pod (left
// unchanged): e.g. a pod naming a PriorityClass the test has just created.
func WaitUntilPodAdmitted(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return WaitUntilAdmitted(ctx, "pod "+pod.Namespace+"/"+pod.Name+pod.GenerateName, func(ctx context.Context, opts metav1.CreateOptions) error {
		_, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod.DeepCopy(), opts)
		return err
	})
}
