// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

func createClaim(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	t.Helper()
	created, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func deleteClaim(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// className derives a class name from a provisioner name.
func className(provisioner string) string {
	return strings.ReplaceAll(strings.SplitN(provisioner, ".", 2)[0], "_", "-")
}

func TestProvisionBindAndDelete(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("bind")
	store := newStore(t)
	runController(t, name, store)
	sc := framework.NewStorageClass(className(name), name, nil)
	sc.MountOptions = []string{"noatime"}
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "bind")

	pvc := createClaim(t, ctx, framework.NewPVC(ns, "data", sc.Name, "2Gi"))
	_, pv, err := framework.WaitForPVCBound(ctx, client, ns, "data")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Name != "pvc-"+string(pvc.UID) || pv.Annotations[controller.AnnProvisionedBy] != name ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		!slices.Equal(pv.Spec.MountOptions, []string{"noatime"}) || pv.Spec.StorageClassName != sc.Name {
		t.Errorf("PV not what the class and claim ask for: %+v", pv)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "2Gi" {
		t.Errorf("capacity %s, want 2Gi", q.String())
	}
	if assets, _ := store.Assets(); !slices.Equal(assets, []string{pv.Name}) {
		t.Errorf("assets %v, want [%s]", assets, pv.Name)
	}
	ev, err := framework.WaitForEvent(ctx, client, pvc, controller.EventProvisioningSucceeded)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.Message, pv.Name) {
		t.Errorf("success event %q does not name the PV", ev.Message)
	}

	deleteClaim(t, ctx, ns, "data")
	if err := framework.WaitForPVDeleted(ctx, client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if assets, _ := store.Assets(); len(assets) != 0 {
		t.Fatalf("asset left after the PV was deleted: %v", assets)
	}
}

func TestRetainKeepsVolumeAndAsset(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("retain")
	store := newStore(t)
	runController(t, name, store, controller.WithFinalizer(true))
	sc := framework.NewStorageClass(className(name), name, nil)
	retain := corev1.PersistentVolumeReclaimRetain
	sc.ReclaimPolicy = &retain
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "retain")

	createClaim(t, ctx, framework.NewPVC(ns, "keep", sc.Name, "1Gi"))
	_, pv, err := framework.WaitForPVCBound(ctx, client, ns, "keep")
	if err != nil {
		t.Fatal(err)
	}
	deleteClaim(t, ctx, ns, "keep")
	if _, err := framework.WaitForPVPhase(ctx, client, pv.Name, corev1.VolumeReleased); err != nil {
		t.Fatal(err)
	}
	if assets, _ := store.Assets(); !slices.Equal(assets, []string{pv.Name}) {
		t.Fatalf("retained asset gone: %v", assets)
	}
	// Deleting the retained PV by hand must not get stuck on our finalizer,
	// and must keep the asset.
	if err := client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, client, pv.Name); err != nil {
		t.Fatalf("retained PV stuck Terminating: %v", err)
	}
	if assets, _ := store.Assets(); !slices.Equal(assets, []string{pv.Name}) {
		t.Fatalf("retained asset deleted with its PV object: %v", assets)
	}
}

func TestFinalizerDeletesAssetWhenPVObjectIsDeletedFirst(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("finalizer")
	store := newStore(t)
	runController(t, name, store, controller.WithFinalizer(true))
	sc := framework.NewStorageClass(className(name), name, nil)
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "finalizer")

	createClaim(t, ctx, framework.NewPVC(ns, "c", sc.Name, "1Gi"))
	_, pv, err := framework.WaitForPVCBound(ctx, client, ns, "c")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pv.Finalizers, controller.VolumeFinalizer) {
		t.Fatalf("finalizers %v", pv.Finalizers)
	}
	// The user deletes the PV object first, then the claim.
	if err := client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteClaim(t, ctx, ns, "c")
	if err := framework.WaitForPVDeleted(ctx, client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if assets, _ := store.Assets(); len(assets) != 0 {
		t.Fatalf("asset leaked: %v", assets)
	}
}

func TestWaitForFirstConsumerAndReschedule(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("wffc")
	store := newStore(t)
	var mu sync.Mutex
	var nodes []string
	store.BeforeProvision = func(_ context.Context, o controller.ProvisionOptions) (controller.ProvisioningState, error) {
		mu.Lock()
		nodes = append(nodes, o.SelectedNodeName)
		mu.Unlock()
		if o.SelectedNodeName == "full-node" {
			return controller.ProvisioningReschedule, errors.New("full-node has no space left")
		}
		return "", nil
	}
	runController(t, name, store)
	sc := framework.NewStorageClass(className(name), name, nil)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc.VolumeBindingMode = &wffc
	cp.CreateTestStorageClass(t, sc)
	immediate := framework.NewStorageClass(className(name)+"-now", name, nil)
	cp.CreateTestStorageClass(t, immediate)
	ns := cp.CreateTestNamespace(t, "wffc")

	late := createClaim(t, ctx, framework.NewPVC(ns, "late", sc.Name, "1Gi"))
	// A claim created after it, in an Immediate class, is a barrier: once it is
	// bound, the controller has looked at the waiting claim too.
	createClaim(t, ctx, framework.NewPVC(ns, "barrier", immediate.Name, "1Gi"))
	if _, _, err := framework.WaitForPVCBound(ctx, client, ns, "barrier"); err != nil {
		t.Fatal(err)
	}
	if n := store.Calls()["pvc-"+string(late.UID)]; n != 0 {
		t.Fatalf("claim without a selected node was provisioned (%d calls)", n)
	}

	// The scheduler picks a full node: the controller asks for another one.
	setSelectedNode(t, ctx, ns, "late", "full-node")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, still := pvc.Annotations[controller.AnnSelectedNode]
		return !still, nil
	})
	if err != nil {
		t.Fatalf("selected-node not dropped after Reschedule: %v", err)
	}
	ev, err := framework.WaitForEvent(ctx, client, late, controller.EventProvisioningFailed)
	if err != nil || !strings.Contains(ev.Message, "full-node has no space left") {
		t.Fatalf("reschedule event: %v, %v", ev, err)
	}

	setSelectedNode(t, ctx, ns, "late", "good-node")
	if _, _, err := framework.WaitForPVCBound(ctx, client, ns, "late"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if nodes[len(nodes)-1] != "good-node" {
		t.Fatalf("provisioned for nodes %v, want last good-node", nodes)
	}
}

func setSelectedNode(t *testing.T, ctx context.Context, ns, name, node string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, controller.AnnSelectedNode, node)
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputGetsWarningEvents(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("bad")
	store := newStore(t)
	store.BeforeProvision = func(_ context.Context, o controller.ProvisionOptions) (controller.ProvisioningState, error) {
		if o.StorageClass.Parameters["size"] == "huge" {
			return controller.ProvisioningFinished, errors.New(`parameter "size": "huge" is not a size; use a quantity such as 10Gi`)
		}
		return "", nil
	}
	runController(t, name, store, controller.WithFailedProvisionThreshold(2))
	sc := framework.NewStorageClass(className(name), name, map[string]string{"size": "huge"})
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "bad")

	bad := createClaim(t, ctx, framework.NewPVC(ns, "bad-param", sc.Name, "1Gi"))
	var ev *corev1.Event
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, client, bad)
		for i := range events {
			if strings.Contains(events[i].Message, "giving up after 2 attempts") {
				ev = &events[i]
			}
		}
		return ev != nil, err
	})
	if err != nil {
		t.Fatalf("no give-up event: %v", err)
	}
	if ev.Type != corev1.EventTypeWarning || ev.Reason != controller.EventProvisioningFailed || !strings.Contains(ev.Message, `parameter "size"`) {
		t.Fatalf("event %s/%s %q does not name the parameter", ev.Type, ev.Reason, ev.Message)
	}
	if calls := store.Calls()["pvc-"+string(bad.UID)]; calls != 2 {
		t.Fatalf("Provision called %d times, want exactly the threshold 2", calls)
	}

	withSelector := framework.NewPVC(ns, "selector", sc.Name, "1Gi")
	withSelector.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}}
	sel := createClaim(t, ctx, withSelector)
	if ev, err := framework.WaitForEvent(ctx, client, sel, controller.EventProvisioningFailed); err != nil || !strings.Contains(ev.Message, "spec.selector") {
		t.Fatalf("selector event: %v, %v", ev, err)
	}
	block := corev1.PersistentVolumeBlock
	blockClaim := framework.NewPVC(ns, "block", sc.Name, "1Gi")
	blockClaim.Spec.VolumeMode = &block
	blk := createClaim(t, ctx, blockClaim)
	if ev, err := framework.WaitForEvent(ctx, client, blk, controller.EventProvisioningFailed); err != nil || !strings.Contains(ev.Message, "volumeMode Block") {
		t.Fatalf("block event: %v, %v", ev, err)
	}
	if assets, _ := store.Assets(); len(assets) != 0 {
		t.Fatalf("bad input left assets: %v", assets)
	}
}

func TestClaimDeletedWhileProvisioningLeaksNothing(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	name := uniqueName("racedelete")
	store := newStore(t)
	inProvision := make(chan struct{})
	release := make(chan struct{})
	store.AfterCreate = func(context.Context, controller.ProvisionOptions) {
		select {
		case inProvision <- struct{}{}:
			<-release
		default:
		}
	}
	runController(t, name, store)
	sc := framework.NewStorageClass(className(name), name, nil)
	cp.CreateTestStorageClass(t, sc)
	ns := cp.CreateTestNamespace(t, "racedelete")
	pvc := createClaim(t, ctx, framework.NewPVC(ns, "short-lived", sc.Name, "1Gi"))
	select {
	case <-inProvision:
	case <-ctx.Done():
		t.Fatal("Provision never called")
	}
	// The asset exists; the claim goes before Provision returns.
	deleteClaim(t, ctx, ns, "short-lived")
	if err := framework.WaitForPVCDeleted(ctx, client, ns, "short-lived"); err != nil {
		t.Fatal(err)
	}
	close(release)
	pvName := "pvc-" + string(pvc.UID)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		assets, err := store.Assets()
		return len(assets) == 0, err
	})
	if err != nil {
		t.Fatal("asset of the deleted claim leaked")
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("PV saved for a deleted claim: %v", err)
	}
}
