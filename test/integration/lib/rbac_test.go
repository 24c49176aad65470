// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// TestLibraryRBACIsEnough runs the controller as a user with exactly the
// rules of lib/deploy/rbac (the component every provisioner's deploy/
// includes), with the journal and leader election in its own namespace,
// through provisioning, deletion and a graceful stop right after a
// provisioning (the journal's final flush), and fails on any request the
// API server's audit log shows refused to that user.
func TestLibraryRBACIsEnough(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	const user = "kubeprov-lib-provisioner" // the subject in testdata/rbac
	home := cp.CreateTestNamespace(t, "lib-home")
	manifests.CreateTestRBAC(t, cp, "testdata/rbac", namespacedInto(home))
	cfg, _, err := cp.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	userClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName("rbac")
	store := newStore(t)
	start := func() func() error {
		stop := runControllerAs(t, userClient, name, store,
			controller.WithJournal(home, "lib-rbac-inflight"),
			controller.WithLeaderElection(home),
			controller.WithLeaderElectionTimings(4*time.Second, 2*time.Second, 200*time.Millisecond))
		return func() error { stop(); return nil }
	}
	stop := start()
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "lib-rbac")
	newClaim := func(claimName string) *corev1.PersistentVolumeClaim {
		return createClaim(t, ctx, framework.NewPVC(ns, claimName, sc.Name, "1Gi"))
	}
	provisionAndDelete := func(claim *corev1.PersistentVolumeClaim) {
		t.Helper()
		_, pv, err := framework.WaitForPVCBound(ctx, client, ns, claim.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := framework.WaitForEvent(ctx, client, claim, controller.EventProvisioningSucceeded); err != nil {
			t.Fatal(err)
		}
		deleteClaim(t, ctx, ns, claim.Name)
		if err := framework.WaitForPVDeleted(ctx, client, pv.Name); err != nil {
			t.Fatal(err)
		}
	}
	provisionAndDelete(newClaim("data"))

	claims := cp.StopWithJournalFlush(ctx, t, stop, start, newClaim, home, user)
	stop = start()
	for _, c := range claims {
		provisionAndDelete(c)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if assets, _ := store.Assets(); len(assets) != 0 {
		t.Errorf("assets left: %v", assets)
	}
	cp.ExpectNoForbidden(t, user)
}

// TestLateRBACLabelsFailLoudly: the labels lib/deploy/rbac selects on, added
// by patches beside the component (testdata/rbac-late-label), come too late:
// kustomize adds none of the library's rules, without an error. The
// controller run with that RBAC is not ready, and its readiness names each
// resource it cannot list and the label that would have granted it.
func TestLateRBACLabelsFailLoudly(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	const user = "kubeprov-lib-late-label" // the subject in testdata/rbac-late-label
	objs, err := manifests.RBAC("testdata/rbac-late-label")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			if o.Labels[controller.RBACRoleLabel] != "cluster" || len(o.Rules) != 0 {
				t.Fatalf("ClusterRole: labels %v, %d rules; want the late label and none of the library's rules", o.Labels, len(o.Rules))
			}
		case *rbacv1.Role:
			if o.Labels[controller.RBACRoleLabel] != "namespace" || len(o.Rules) != 0 {
				t.Fatalf("Role: labels %v, %d rules; want the late label and none of the library's rules", o.Labels, len(o.Rules))
			}
		}
	}
	home := cp.CreateTestNamespace(t, "lib-late-label")
	cp.CreateTestRBACObjects(t, "testdata/rbac-late-label", objs, namespacedInto(home))
	cfg, _, err := cp.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := startControllerAs(t, kubernetes.NewForConfigOrDie(cfg), uniqueName("late-label"), newStore(t),
		controller.WithJournal(home, "lib-late-label-inflight"))

	want := []string{"persistentvolumeclaims (list, watch", "persistentvolumes (list, watch", "storageclasses.storage.k8s.io (list, watch",
		controller.RBACRoleLabel + ": cluster", "lib/deploy/rbac"}
	var reason error
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		reason = c.NotReadyReason()
		return reason != nil && containsAll(reason.Error(), want), nil
	})
	if err != nil {
		t.Fatalf("not-ready reason %v; want it to name %q", reason, want)
	}
	t.Logf("Not ready: %v", reason)
	if c.Ready() {
		t.Error("a replica that cannot list its objects reports ready")
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// namespacedInto moves the Roles and RoleBindings of lib/deploy/rbac into
// ns, the provisioner's own namespace, as a user's kustomization does.
func namespacedInto(ns string) func(runtime.Object) {
	return func(obj runtime.Object) {
		switch o := obj.(type) {
		case *rbacv1.Role:
			o.Namespace = ns
		case *rbacv1.RoleBinding:
			o.Namespace = ns
		}
	}
}
