// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

// labelCapacityProvisioner is the label naming the provisioner on the
// CSIStorageCapacity objects hostpath publishes (hostpath/pkg/capacity).
const labelCapacityProvisioner = "hostpath.kubeprov.io/provisioner"

// TestCapacity: with --enable-capacity and a DNS-style provisioner name
// the provisioner publishes, for its WaitForFirstConsumer class on its
// node, a CSIStorageCapacity object with the room the budget leaves; a
// provisioned claim takes its size off at once (not at the next poll: the
// poll interval is an hour), and its deletion gives it back.
func TestCapacity(t *testing.T) {
	ctx := framework.TestContext(t, 3*time.Minute)
	var provisioner string
	e := setup(t, "capacity", func(sc *storagev1.StorageClass) {
		provisioner = sc.Name + ".test.kubeprov.io"
		sc.Provisioner = provisioner
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	e.provisioner = provisioner
	createCSIDriver(t, provisioner)
	config := budgetConfig(t, e.pvDir, "3Gi")
	p := startProvisioner(t, e.env(), e.args(node, "--config="+config, "--enable-capacity", "--capacity-poll-interval=1h")...)

	csc := waitForCapacity(ctx, t, e, "3Gi")
	if csc.StorageClassName != e.class.Name {
		t.Errorf("object %s: storageClassName %q, want %q", csc.Name, csc.StorageClassName, e.class.Name)
	}
	if want := map[string]string{corev1.LabelHostname: node}; csc.NodeTopology == nil ||
		len(csc.NodeTopology.MatchExpressions) != 0 || !maps.Equal(csc.NodeTopology.MatchLabels, want) {
		t.Errorf("object %s: nodeTopology %v, want matchLabels %v", csc.Name, csc.NodeTopology, want)
	}
	if csc.MaximumVolumeSize == nil || csc.MaximumVolumeSize.String() != "3Gi" {
		t.Errorf("object %s: maximumVolumeSize %v, want 3Gi (one path)", csc.Name, csc.MaximumVolumeSize)
	}

	claim := e.createPVC(t, "c", nil) // 1Gi
	selectNode(ctx, t, e.ns, claim.Name, node)
	bound(ctx, t, e.ns, claim.Name)
	if csc = waitForCapacity(ctx, t, e, "2Gi"); csc.MaximumVolumeSize.String() != "2Gi" {
		t.Errorf("after a 1Gi claim: maximumVolumeSize %v, want 2Gi", csc.MaximumVolumeSize)
	}

	deletePVC(t, e.ns, claim.Name)
	waitForCapacity(ctx, t, e, "3Gi")
	// One object written three times: created, and updated once for the
	// claim and once for its deletion.
	checkCapacityWrites(t, p, map[string]float64{"create": 1, "update": 2})
}

// createCSIDriver makes the CSIDriver that tells kube-scheduler to read the
// provisioner's CSIStorageCapacity objects, as the README says to.
func createCSIDriver(t *testing.T, name string) {
	t.Helper()
	driver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(false),
			PodInfoOnMount:       ptr.To(false),
			StorageCapacity:      ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
	if _, err := cp.Client.StorageV1().CSIDrivers().Create(t.Context(), driver, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := cp.Client.StorageV1().CSIDrivers().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// waitForCapacity waits until the test's provisioner has exactly one
// CSIStorageCapacity object in its namespace, saying capacity, and returns
// it.
func waitForCapacity(ctx context.Context, t *testing.T, e *testEnv, capacity string) *storagev1.CSIStorageCapacity {
	t.Helper()
	var got []storagev1.CSIStorageCapacity
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.StorageV1().CSIStorageCapacities(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labelCapacityProvisioner + "=" + e.provisioner})
		if err != nil {
			return false, err
		}
		got = list.Items
		return len(got) == 1 && got[0].Capacity != nil && got[0].Capacity.String() == capacity, nil
	})
	if err != nil {
		t.Fatalf("CSIStorageCapacity objects of %s in %s: %v, want one with capacity %s: %v", e.provisioner, e.ns, describeCapacities(got), capacity, err)
	}
	return &got[0]
}

func describeCapacities(list []storagev1.CSIStorageCapacity) []string {
	var out []string
	for _, c := range list {
		out = append(out, fmt.Sprintf("%s(class %s, capacity %v, max %v, topology %v)", c.Name, c.StorageClassName, c.Capacity, c.MaximumVolumeSize, c.NodeTopology))
	}
	return out
}

// checkCapacityWrites checks the provisioner's count of CSIStorageCapacity
// writes by verb.
func checkCapacityWrites(t *testing.T, p *framework.Process, want map[string]float64) {
	t.Helper()
	// The publisher counts a write once kube-apiserver has answered it: the
	// object the test saw may be a moment ahead of the counter, as it may
	// be of a scrape.
	got := map[string]float64{}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		families, err := framework.ScrapeMetrics("http://" + p.Endpoint + "/metrics")
		if err != nil {
			return false, err
		}
		for verb, n := range want {
			if got[verb], err = framework.MetricValue(families, "hostpath_csistoragecapacity_writes_total", map[string]string{"verb": verb}); err != nil {
				return false, nil
			}
			if got[verb] > n {
				return false, fmt.Errorf("more writes than the changes called for")
			}
		}
		return maps.Equal(got, want), nil
	})
	if err != nil {
		t.Errorf("hostpath_csistoragecapacity_writes_total = %v, want %v: %v", got, want, err)
	}
}
