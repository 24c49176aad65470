// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// deployUser makes a user with exactly the permissions of csi/deploy, its
// Role in a new namespace home, and returns the user, home and a
// kubeconfig of the user.
func (e *env) deployUser() (user, home, kubeconfig string) {
	e.t.Helper()
	user = uniqueName("csi-provisioner")
	home = cp.CreateTestNamespace(e.t, "csi-home")
	e.grantDeployRBAC(user, home)
	_, kubeconfig, err := cp.AddUser(user, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return user, home, kubeconfig
}

// grantDeployRBAC applies the rules csi/deploy renders (its rbac.yaml and
// the library's) to user: the ClusterRole cluster-wide and the Role in
// namespace ns.
func (e *env) grantDeployRBAC(user, ns string) {
	t := e.t
	t.Helper()
	objs, err := manifests.RBAC(filepath.Join("..", "..", "..", "csi", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	rbac := cp.Client.RbacV1()
	var created []runtime.Object
	for _, obj := range objs {
		// Only the rules are the deploy's; names and subjects are the test's.
		switch role := obj.(type) {
		case *rbacv1.ClusterRole:
			role.ObjectMeta = metav1.ObjectMeta{Name: user}
			if _, err := rbac.ClusterRoles().Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}}
			if _, err := rbac.ClusterRoleBindings().Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			created = append(created, role, binding)
			t.Cleanup(func() {
				_ = rbac.ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
				_ = rbac.ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
			})
		case *rbacv1.Role:
			role.ObjectMeta = metav1.ObjectMeta{Name: user, Namespace: ns}
			if _, err := rbac.Roles(ns).Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}}
			if _, err := rbac.RoleBindings(ns).Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			created = append(created, role, binding)
		}
	}
	if err := framework.WaitUntilAuthorized(e.ctx, cp.Client, created...); err != nil {
		t.Fatal(err)
	}
}

// TestDeployRBAC runs csi-provisioner as a user with exactly the rules
// csi/deploy renders (deploy/rbac.yaml and lib/deploy/rbac), with leader
// election and the journal in its own namespace, and exercises every
// permission: topology, a provisioner secret, a clone, a reschedule, a
// deletion and a graceful stop. Nothing is forbidden (audit log).
func TestDeployRBAC(t *testing.T) {
	e := newEnv(t, inProcessDriver, csidriver.Options{Topology: true})
	user, home, kubeconfig := e.deployUser()
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-election", "--leader-election-namespace=" + home}
	e.prov = e.startProvisioner(args...)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	node := e.createNode("a", true)
	secretNS := cp.CreateTestNamespace(t, "csi-secrets")
	e.createSecret(secretNS, "creds")
	class := e.createClass(map[string]string{prefix + "provisioner-secret-name": "creds", prefix + "provisioner-secret-namespace": secretNS},
		waitForFirstConsumer)
	source, _ := e.bound(e.createClaim(class.Name, "1Gi", selectedNode(node)))
	clone, pv := e.bound(e.createClaim(class.Name, "1Gi", selectedNode(node), cloneOf(source.Name)))
	if got := e.driver.LastCreateRequest(pv.Name).GetSecrets(); len(got) == 0 {
		t.Error("CreateVolume got no secret")
	}

	e.inProcess.FailCreate(csidriver.Fault{Code: codes.ResourceExhausted, Message: "full"})
	rescheduled := e.createClaim(class.Name, "1Gi", selectedNode(node))
	e.eventually("the selected-node annotation to be removed", func() bool {
		c, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, rescheduled.Name, metav1.GetOptions{})
		return err == nil && c.Annotations["volume.kubernetes.io/selected-node"] == ""
	})

	e.deleteClaim(clone)
	e.pvGone(pv.Name)
	e.deleteClaim(source)
	e.noVolumeLeft()
	// The journal and the Lease live in the provisioner's own namespace.
	cms, err := cp.Client.CoreV1().ConfigMaps(home).List(e.ctx, metav1.ListOptions{})
	if err != nil || !slices.ContainsFunc(cms.Items, func(cm corev1.ConfigMap) bool { return strings.HasSuffix(cm.Name, "-inflight") }) {
		t.Errorf("no in-flight journal in namespace %s (%v)", home, err)
	}
	leases, err := cp.Client.CoordinationV1().Leases(home).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(leases.Items) != 1 {
		t.Errorf("no leader Lease in namespace %s (%v)", home, err)
	}
	if logs := e.prov.Log(); strings.Contains(strings.ToLower(logs), "forbidden") {
		t.Errorf("csi-provisioner was refused something:\n%s", grepLines(logs, "orbidden"))
	}

	// A graceful stop writes the journal's last removals (a PATCH). Then
	// nothing in the whole flow may have been refused (audit log).
	restart := func() *framework.Process {
		e.prov = e.startProvisioner(args...)
		return e.prov
	}
	claims := cp.StopWithJournalFlush(e.ctx, t, e.prov.Stop, func() func() error { return restart().Stop }, func(string) *corev1.PersistentVolumeClaim {
		return e.createClaim(class.Name, "1Gi", selectedNode(node))
	}, home, user)
	restart()
	for _, c := range claims {
		e.deleteClaim(c)
	}
	e.noVolumeLeft()
	if err := e.prov.Stop(); err != nil {
		t.Error(err)
	}
	cp.ExpectNoForbidden(t, user)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
