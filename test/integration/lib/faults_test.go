// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

// startProcess runs faultprovisioner for the provisioner name over root,
// without waiting for it to be ready, and kills it when the test ends.
func startProcess(t *testing.T, name, root string, extra ...string) *framework.Process {
	t.Helper()
	args := append([]string{
		"--kubeconfig", cp.KubeconfigPath, "--provisioner", name, "--root", root,
		"--retry-interval-start=100ms", "--retry-interval-max=2s", "--kube-api-qps=200", "--kube-api-burst=400",
		"--leader-election-namespace=default", "-v=2",
	}, extra...)
	p, err := framework.StartProcess(t.Context(), framework.ProcessOptions{
		Binary:  faultBinary,
		Args:    args,
		LogPath: filepath.Join(t.TempDir(), "provisioner.log"),
		NoWait:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("provisioner log (%s), last lines:\n%s", name, p.LogTail(60))
		}
	})
	return p
}

func waitForFile(ctx context.Context, path string) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
}

func waitForAssets(ctx context.Context, root string, want []string) error {
	var got []string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		var err error
		got, err = dirstore.Assets(root)
		return slices.Equal(got, want), err
	})
	if err != nil {
		return fmt.Errorf("assets %v, want %v: %w", got, want, err)
	}
	return nil
}

// TestKillBetweenProvisionAndSave kills the provisioner process exactly after
// Provision created the asset and while the PV create is in flight, then
// restarts it: the asset must end up either saved as a bound PV (claim kept)
// or deleted (claim deleted while the provisioner was down).
func TestKillBetweenProvisionAndSave(t *testing.T) {
	for _, claimDeleted := range []bool{true, false} {
		t.Run(fmt.Sprintf("claimDeleted=%v", claimDeleted), func(t *testing.T) {
			ctx := framework.TestContext(t, 3*time.Minute)
			name := uniqueName("kill")
			root := t.TempDir()
			sc := framework.NewStorageClass(className(name), name, nil)
			cp.CreateTestStorageClass(t, sc)
			ns := cp.CreateTestNamespace(t, "kill")
			marker := filepath.Join(t.TempDir(), "pv-create-sent")

			first := startProcess(t, name, root, "--hang-pv-create-marker", marker)
			pvc := createClaim(t, ctx, framework.NewPVC(ns, "victim", sc.Name, "1Gi"))
			pvName := "pvc-" + string(pvc.UID)
			if err := waitForFile(ctx, marker); err != nil {
				t.Fatal("provisioner never tried to save the PV")
			}
			if err := waitForAssets(ctx, root, []string{pvName}); err != nil {
				t.Fatal(err)
			}
			if err := first.Kill(); err != nil {
				t.Fatal(err)
			}

			if claimDeleted {
				deleteClaim(t, ctx, ns, "victim")
				if err := framework.WaitForPVCDeleted(ctx, client, ns, "victim"); err != nil {
					t.Fatal(err)
				}
			}
			startProcess(t, name, root)
			if claimDeleted {
				if err := waitForAssets(ctx, root, nil); err != nil {
					t.Fatalf("asset of a claim deleted while the provisioner was down leaked: %v", err)
				}
				if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("PV for a deleted claim: %v", err)
				}
			} else {
				_, pv, err := framework.WaitForPVCBound(ctx, client, ns, "victim")
				if err != nil {
					t.Fatal(err)
				}
				if pv.Name != pvName {
					t.Fatalf("bound to %s, want %s", pv.Name, pvName)
				}
				if err := waitForAssets(ctx, root, []string{pvName}); err != nil {
					t.Fatal(err)
				}
			}
			// The journal ends empty.
			journal := controller.JournalName(name, "")
			err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, journal, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				return len(cm.Data) == 0, nil
			})
			if err != nil {
				t.Fatalf("journal %s not emptied: %v", journal, err)
			}
		})
	}
}

// countingStore counts Provision calls per PV name across controllers.
type countingStore struct {
	*dirstore.Store
	mu    *sync.Mutex
	calls map[string][]string // PV name -> controller identities
	id    string
}

func (c countingStore) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	c.mu.Lock()
	c.calls[o.PVName] = append(c.calls[o.PVName], c.id)
	c.mu.Unlock()
	return c.Store.Provision(ctx, o)
}

func TestLeaderElectionNeverProvisionsTwice(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	name := uniqueName("leader")
	store := newStore(t)
	var mu sync.Mutex
	calls := map[string][]string{}
	le := []controller.Option{
		controller.WithLeaderElection("default"),
		controller.WithLeaderElectionTimings(4*time.Second, 2*time.Second, 500*time.Millisecond),
	}
	stops := map[string]func(){}
	for _, id := range []string{"replica-a", "replica-b"} {
		s := countingStore{Store: store, mu: &mu, calls: calls, id: id}
		stops[id] = runController(t, name, s, append(le, controller.WithIdentity(id))...)
	}
	sc := framework.NewStorageClass(className(name), name, nil)
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "leader")
	burst := func(prefix string, n int) {
		for i := range n {
			createClaim(t, ctx, framework.NewPVC(ns, fmt.Sprintf("%s-%d", prefix, i), sc.Name, "1Gi"))
		}
		for i := range n {
			if _, _, err := framework.WaitForPVCBound(ctx, client, ns, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst("first", 20)
	lease, err := client.CoordinationV1().Leases("default").Get(ctx, controller.LeaseName(name), metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("no leader Lease: %v", err)
	}
	leader := *lease.Spec.HolderIdentity
	// The leader goes away; the other replica takes over and serves new claims.
	stops[leader]()
	burst("second", 10)

	mu.Lock()
	defer mu.Unlock()
	for pv, ids := range calls {
		if len(ids) != 1 {
			t.Errorf("%s provisioned %d times by %v", pv, len(ids), ids)
		}
	}
	if len(calls) != 30 {
		t.Errorf("%d volumes provisioned, want 30", len(calls))
	}
	pvs, _ := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	ours := 0
	for _, pv := range pvs.Items {
		if pv.Annotations[controller.AnnProvisionedBy] == name {
			ours++
		}
	}
	if assets, _ := store.Assets(); len(assets) != ours || ours != 30 {
		t.Errorf("%d assets, %d PVs, want 30 each", len(assets), ours)
	}
}

func TestAPIServerRestartMidBurstLosesNothing(t *testing.T) {
	ctx := framework.TestContext(t, 4*time.Minute)
	name := uniqueName("restart")
	store := newStore(t)
	runController(t, name, store)
	sc := framework.NewStorageClass(className(name), name, nil)
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "restart")
	const n = 40
	for i := range n {
		createClaim(t, ctx, framework.NewPVC(ns, fmt.Sprintf("c-%d", i), sc.Name, "1Gi"))
	}
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	var pvNames []string
	for i := range n {
		_, pv, err := framework.WaitForPVCBound(ctx, client, ns, fmt.Sprintf("c-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pvNames = append(pvNames, pv.Name)
	}
	slices.Sort(pvNames)
	if err := waitForAssets(ctx, store.Root, pvNames); err != nil {
		t.Fatalf("assets do not match PVs after an API server restart: %v", err)
	}
	for pv, calls := range store.Calls() {
		if calls > 1 {
			t.Logf("%s: Provision called %d times (idempotent retries)", pv, calls)
		}
	}
}
