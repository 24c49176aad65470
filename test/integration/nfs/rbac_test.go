// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// deployServiceAccount is the ServiceAccount nfs/deploy binds its RBAC to,
// and deployService the Service its Role lets server mode read.
const (
	deployServiceAccount = "nfs-provisioner"
	deployService        = "nfs-provisioner"
)

// TestServerAsServiceAccount runs server mode as its ServiceAccount with
// exactly the RBAC nfs/deploy/server renders (moved into a namespace of the
// test), reading its Service as the StatefulSet does, through provisioning,
// deletion and a graceful stop right after a provisioning (the journal's
// final flush), and fails on any request the API server's audit log shows
// refused to the ServiceAccount.
func TestServerAsServiceAccount(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := cp.CreateTestNamespace(t, "nfs-sa")
	account := "system:serviceaccount:" + ns + ":" + deployServiceAccount
	manifests.CreateTestRBAC(t, cp, filepath.Join("..", "..", "..", "nfs", "deploy", "server"), func(obj runtime.Object) {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			o.Name = ns + "-" + o.Name
		case *rbacv1.ClusterRoleBinding:
			o.Name, o.RoleRef.Name = ns+"-"+o.Name, ns+"-"+o.RoleRef.Name
			o.Subjects[0].Namespace = ns
		case *rbacv1.Role:
			o.Namespace = ns
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			o.Subjects[0].Namespace = ns
		}
	})
	_, kubeconfig, err := cp.AddUser(account, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: deployService},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "nfs", Port: 2049}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The later --kubeconfig wins over startProc's admin one.
	srv := startServer(t, []string{"POD_NAMESPACE=" + ns}, "--server-hostname=", "--service-name="+deployService, "--kubeconfig="+kubeconfig)
	const class = "nfs-server-sa"
	cp.CreateTestStorageClass(t, framework.NewStorageClass(class, srv.name, nil))
	pv := bound(t, ctx, ns, "data", class, nil)
	deleteClaim(t, ctx, ns, "data", pv.Name)

	restart := func() func() error {
		srv.start(t)
		return srv.Stop
	}
	claims := cp.StopWithJournalFlush(ctx, t, srv.Stop, restart, func(name string) *corev1.PersistentVolumeClaim {
		return createPVC(t, ns, name, class, "1Mi", nil)
	}, ns, account)
	stop := restart()
	for _, c := range claims {
		_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		deleteClaim(t, ctx, ns, c.Name, pv.Name)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
	cp.ExpectNoForbidden(t, account)
}
