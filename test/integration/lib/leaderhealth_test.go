// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// hungStore never finishes a provisioning until released, whatever its
// context says: what keeps a leader that lost its Lease from stopping.
type hungStore struct{ started, release chan struct{} }

func (s hungStore) Provision(context.Context, controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	close(s.started)
	<-s.release
	return nil, controller.ProvisioningFinished, errors.New("released")
}

func (hungStore) Delete(context.Context, *corev1.PersistentVolume) error { return nil }

// TestLeaderElectionLivenessOnTheAPIServer: the CSI sidecars' liveness probe
// path, /healthz/leader-election, of a binary's endpoint (cli.Common.Run)
// answers 200 while the leader renews its Lease at the API server, and 503
// once the API server has refused its renewals for the lease duration plus
// the health timeout while a hung operation keeps it from stopping.
func TestLeaderElectionLivenessOnTheAPIServer(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("health")
	user := "leader-health"
	cfg, _, err := cp.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitUntilAuthorized(ctx, client, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	own := kubernetes.NewForConfigOrDie(cfg)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	o := cli.NewCommon(name)
	o.LeaderElection, o.LeaderElectionNamespace, o.HTTPEndpoint = true, "default", addr
	const leaseDuration = 2 * time.Second
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = leaseDuration, time.Second, 250*time.Millisecond
	store := hungStore{started: make(chan struct{}), release: make(chan struct{})}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- o.Run(runCtx, &cli.Clients{Config: cfg, Kube: own, Events: own}, name, store, cli.RunOptions{
			Controller: testOptions(controller.WithLeaderElectionHealthTimeout(500 * time.Millisecond)),
		})
	}()
	released := false
	t.Cleanup(func() {
		cancel()
		if !released {
			close(store.release)
		}
		select {
		case err := <-done:
			t.Logf("Run returned (leadership was lost): %v", err)
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
	probe := func() int {
		resp, err := http.Get("http://" + addr + "/healthz/leader-election")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := client.CoordinationV1().Leases("default").Get(ctx, controller.LeaseName(name), metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	}); err != nil {
		t.Fatalf("never became leader: %v", err)
	}
	// Longer than the lease duration plus the health timeout.
	for deadline := time.Now().Add(2*leaseDuration + time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code := probe(); code != http.StatusOK {
			t.Fatalf("leader renewing its Lease: /healthz/leader-election answered %d, want 200", code)
		}
	}

	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "health")
	createClaim(t, ctx, framework.NewPVC(ns, "data", sc.Name, "1Gi"))
	<-store.started
	// The API server now refuses everything this user asks, renewals too.
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return probe() == http.StatusServiceUnavailable, nil
	}); err != nil {
		t.Fatalf("leader whose renewals are refused: /healthz/leader-election still answers %d", probe())
	}
	if since := time.Since(revoked); since < leaseDuration {
		t.Errorf("unhealthy %v after the renewals were refused, before the lease duration (%v) was over", since, leaseDuration)
	}
	select {
	case err := <-done:
		done <- err
		t.Fatalf("Run returned while an operation hangs: %v", err)
	default:
	}
	released = true
	close(store.release)
}
