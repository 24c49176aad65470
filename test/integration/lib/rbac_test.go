// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	manifests.CreateTestRBAC(t, cp, "testdata/rbac", func(obj runtime.Object) {
		switch o := obj.(type) {
		case *rbacv1.Role:
			o.Namespace = home
		case *rbacv1.RoleBinding:
			o.Namespace = home
		}
	})
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
