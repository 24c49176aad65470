// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestControlPlaneLifecycle runs its own control plane to check what the
// integration tests take for granted: users and RBAC, an apiserver restart that
// existing clients survive, and a Stop that leaves nothing behind.
func TestControlPlaneLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := testContext(t, 10*time.Minute)
	cp, err := Start(ctx, Options{
		ControllerManagerArgs: []string{"--kube-api-qps=100"},
		Log:                   t.Logf,
	})
	if err != nil {
		Unavailable(t, "cannot start the control plane: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop()
		}
	})

	apiURL, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	if apiURL.Hostname() != "127.0.0.1" {
		t.Errorf("apiserver at %s, want 127.0.0.1", cp.Config.Host)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath)
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	if got := whoAmI(t, fromFile); got.Username != "admin" || !slices.Contains(got.Groups, "system:masters") {
		t.Errorf("admin kubeconfig authenticates as %+v, want admin in system:masters", got)
	}

	cfg := cp.RestConfig()
	cfg.UserAgent = "mutated"
	if cp.Config.UserAgent == "mutated" {
		t.Error("RestConfig returned the shared config, not a copy")
	}

	// A user without permissions, then with read access to PVCs in one namespace.
	ns, err := CreateNamespace(ctx, cp.Client, "lifecycle")
	if err != nil {
		t.Fatal(err)
	}
	aliceCfg, aliceKubeconfig, err := cp.AddUser("alice", []string{"storage-team"})
	if err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(aliceCfg)
	if _, err := alice.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice listing PVCs before any RoleBinding: got %v, want Forbidden", err)
	}
	// An own Role: the aggregated ClusterRoles (view, edit, admin) stay empty
	// because no clusterrole-aggregation controller runs.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pvc-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-team-pvc-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "storage-team"}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceFromFile, err := clientcmd.BuildConfigFromFlags("", aliceKubeconfig)
	if err != nil {
		t.Fatalf("alice's kubeconfig: %v", err)
	}
	if got := whoAmI(t, aliceFromFile); got.Username != "alice" || !slices.Contains(got.Groups, "storage-team") {
		t.Errorf("alice's kubeconfig authenticates as %+v", got)
	}
	// The authorizer sees the RoleBinding through an informer, so allow it a moment.
	var listErr error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, listErr = kubernetes.NewForConfigOrDie(aliceFromFile).CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		return listErr == nil, nil
	}); err != nil {
		t.Errorf("alice listing PVCs with a RoleBinding: %v", listErr)
	}

	// Restart: the same clients (admin and alice) work afterwards, and the
	// controller manager reconnects.
	hostBefore := cp.Config.Host
	start := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatalf("RestartAPIServer: %v", err)
	}
	t.Logf("RestartAPIServer took %s", time.Since(start).Round(time.Millisecond))
	if cp.Config.Host != hostBefore {
		t.Errorf("apiserver moved from %s to %s", hostBefore, cp.Config.Host)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("admin client after restart: %v", err)
	}
	if _, err := alice.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("alice's client after restart: %v", err)
	}
	sc := NewStorageClass("lifecycle-"+ns, "example.com/after-restart", nil)
	if _, err := cp.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := NewPVC(ns, "after-restart", sc.Name, "1Gi")
	if _, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if got, err := WaitForPVCAnnotation(ctx, cp.Client, ns, pvc.Name, AnnStorageProvisioner); err != nil || got != sc.Provisioner {
		t.Fatalf("kube-controller-manager after restart: got %q, %v; want %q", got, err, sc.Provisioner)
	}
	t.Logf("kube-controller-manager handled a new PVC %s after the restart", time.Since(start).Round(time.Millisecond))

	// DeleteNamespace removes the namespace for good although no namespace
	// controller runs.
	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WaitForPVCDeleted(ctx, cp.Client, ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
	if err := DeleteNamespace(ctx, cp.Client, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after DeleteNamespace: got %v, want NotFound", ns, err)
	}

	// Stop ends every process and removes the directory.
	kcmPid := cp.kcm.cmd.Process.Pid
	etcdAddr := cp.env.ControlPlane.Etcd.URL.Host
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := syscall.Kill(kcmPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kube-controller-manager pid %d after Stop: kill -0 gave %v, want ESRCH", kcmPid, err)
	}
	for name, addr := range map[string]string{"kube-apiserver": apiURL.Host, "etcd": etcdAddr} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			t.Errorf("%s still listens on %s after Stop", name, addr)
		}
	}
	if _, err := os.Stat(cp.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Stop: %v, want it removed", cp.Dir, err)
	}
	if err := cp.RestartAPIServer(ctx); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("RestartAPIServer after Stop: got %v, want an error", err)
	}
}

func whoAmI(t *testing.T, cfg *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().
		Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return review.Status.UserInfo
}
