// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

// waitForMessage waits for an event about obj whose message contains want.
func waitForMessage(t *testing.T, ctx context.Context, obj *corev1.PersistentVolumeClaim, eventType, want string) {
	t.Helper()
	waitForMessageOr(t, ctx, obj, eventType, want, func() bool { return false })
}

// A claim that asks for a snapshot gets no empty volume from a provisioner
// that cannot restore one: a Warning event says why.
func TestClaimWithDataSourceIsRefused(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("source")
	store := newStore(t)
	runController(t, name, store)
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "source")
	pvc := framework.NewPVC(ns, "restored", sc.Name, "1Gi")
	pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "original"}
	restored := createClaim(t, ctx, pvc)
	waitForMessage(t, ctx, restored, corev1.EventTypeWarning, `cannot fill a volume from a data source (PersistentVolumeClaim "original")`)
	if assets, _ := store.Assets(); len(assets) != 0 {
		t.Fatalf("an empty volume was made for a claim that asked for data: %v", assets)
	}
}

// panicOnce panics in its first Provision.
type panicOnce struct {
	controller.Provisioner
	panicked atomic.Bool
}

func (p *panicOnce) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if !p.panicked.Swap(true) {
		panic("a bug in the provisioner")
	}
	return p.Provisioner.Provision(ctx, o)
}

// A provisioner that panics does not take the process down: the claim gets
// a Warning event and is provisioned by the retry.
func TestPanickingProvisionerIsRetried(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("panic")
	runController(t, name, &panicOnce{Provisioner: newStore(t)})
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "panic")
	pvc := createClaim(t, ctx, framework.NewPVC(ns, "data", sc.Name, "1Gi"))
	if _, _, err := framework.WaitForPVCBound(ctx, client, ns, pvc.Name); err != nil {
		t.Fatal(err)
	}
	waitForMessage(t, ctx, pvc, corev1.EventTypeWarning, "the provisioner panicked; its log has the details")
}

// One namespace whose claims never finish provisioning, each carrying as much
// metadata as the provisioner reads, cannot stop another namespace's claim.
func TestOneTenantCannotBlockAnother(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	name := uniqueName("tenant")
	store := &declaringStore{Store: newStore(t)}
	store.BeforeProvision = func(_ context.Context, o controller.ProvisionOptions) (controller.ProvisioningState, error) {
		if strings.HasPrefix(o.PVC.Namespace, "noisy") {
			return controller.ProvisioningInBackground, fmt.Errorf("still creating")
		}
		return "", nil
	}
	runController(t, name, store)
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	noisy := cp.CreateTestNamespace(t, "noisy")
	// A namespace may hold a quarter of the journal's 32 ConfigMaps of 800 KB:
	// 500 entries of 15 KiB are more than that.
	big := strings.Repeat("d", 15*1024)
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() {
			pvc := framework.NewPVC(noisy, fmt.Sprintf("flood-%d", i), sc.Name, "1Gi")
			pvc.Annotations = map[string]string{"example.com/dir-name": big}
			if _, err := client.CoreV1().PersistentVolumeClaims(noisy).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	const full = "has too many claims being provisioned at once"
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(noisy).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, full) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no claim of the flooding namespace was told %q: %v", full, err)
	}
	calm := cp.CreateTestNamespace(t, "calm")
	pvc := createClaim(t, ctx, framework.NewPVC(calm, "data", sc.Name, "1Gi"))
	if _, _, err := framework.WaitForPVCBound(ctx, client, calm, pvc.Name); err != nil {
		t.Fatalf("another namespace's claim was blocked: %v", err)
	}
}

// declaringStore reads one claim annotation, and says so: the journal keeps it.
type declaringStore struct{ *dirstore.Store }

func (declaringStore) ClaimMetadataKeys(*storagev1.StorageClass) (labels, annotations []string) {
	return nil, []string{"example.com/dir-name"}
}

// A replica without permission to use its journal is not ready, says why in
// its readiness, and the claims it cannot serve get a Warning event naming
// the missing permission.
func TestMissingPermissionsAreReportedNotSilent(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("rbac")
	// Everything but the journal ConfigMap.
	cfg := userWithRules(t, ctx, name, provisionerRules)

	c, _ := startControllerAs(t, kubernetes.NewForConfigOrDie(cfg), name, newStore(t))

	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "rbac")
	pvc := createClaim(t, ctx, framework.NewPVC(ns, "data", sc.Name, "1Gi"))
	waitForMessage(t, ctx, pvc, corev1.EventTypeWarning, "not allowed to use its in-flight journal ConfigMap")
	if c.Ready() {
		t.Fatal("a replica that cannot use its journal reports ready")
	}
	if err := c.NotReadyReason(); err == nil || !strings.Contains(err.Error(), "configmaps") {
		t.Fatalf("not-ready reason %v does not name what is missing", err)
	}
}

// A replica under leader election whose RBAC lacks the Lease (an old
// project's rules, kept in a port) never leads: it says why in its readiness,
// and the claims waiting for it get a Warning event naming the missing rule,
// instead of staying Pending in silence.
func TestForbiddenLeaseIsReportedOnWaitingClaims(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("lease")
	home := cp.CreateTestNamespace(t, "lease-home")
	// The journal is allowed, the Lease is not.
	rules := append(slices.Clone(provisionerRules), rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	limited := kubernetes.NewForConfigOrDie(userWithRules(t, ctx, name, rules))
	c, _ := startControllerAs(t, limited, name, newStore(t),
		controller.WithJournal(home, "lease-inflight"),
		controller.WithLeaderElection(home),
		controller.WithLeaderElectionTimings(4*time.Second, 2*time.Second, 200*time.Millisecond))

	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "lease")
	pvc := createClaim(t, ctx, framework.NewPVC(ns, "data", sc.Name, "1Gi"))
	waitForMessage(t, ctx, pvc, corev1.EventTypeWarning, "leases.coordination.k8s.io")
	if err := c.NotReadyReason(); err == nil || !strings.Contains(err.Error(), "leases") {
		t.Fatalf("not-ready reason %v does not name the Lease", err)
	}
}

// provisionerRules grant what the controller needs but its journal
// ConfigMap and its leader Lease.
var provisionerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "delete", "update", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}

// userWithRules returns the client config of a new user granted exactly
// rules, cluster-wide, until the test ends.
func userWithRules(t *testing.T, ctx context.Context, name string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	user := "provisioner-" + strings.ReplaceAll(strings.Split(name, ".")[0], "_", "-")
	cfg, _, err := cp.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitUntilAuthorized(ctx, client, role, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	return cfg
}
