// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/csidriver"
)

// Storage capacity tracking (--enable-capacity). No kube-scheduler runs
// here: the tests assert the CSIStorageCapacity objects the scheduler
// reads. Its rule (VolumeBinding plugin, for a CSIDriver with
// storageCapacity: true): a node fits an unbound WaitForFirstConsumer
// claim if an object of the claim's class in any namespace has a
// nodeTopology selector matching the node's labels and a maximumVolumeSize
// (or, when that is unset, a capacity) of at least the claim's request. So
// each object must name the class, select exactly its segment's nodes and
// carry the driver's numbers.

const (
	driverNameLabel = "csi.storage.k8s.io/drivername"
	managedByLabel  = "csi.storage.k8s.io/managed-by"
)

// capacities describes the objects of the driver managed by the
// provisioner in ns as "class zone capacity[/maximumVolumeSize]", sorted;
// zone is * for a selector of every node.
func (e *env) capacities(ns string) []string {
	e.t.Helper()
	list, err := cp.Client.StorageV1().CSIStorageCapacities(ns).List(e.ctx, metav1.ListOptions{
		LabelSelector: driverNameLabel + "=" + e.name + "," + managedByLabel + "=external-provisioner",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		zone := "nil"
		if t := c.NodeTopology; t != nil {
			zone = "*"
			if len(t.MatchExpressions) > 0 || len(t.MatchLabels) > 1 {
				zone = fmt.Sprintf("%v", t)
			} else if z, ok := t.MatchLabels[zoneKey]; ok {
				zone = z
			}
		}
		s := fmt.Sprintf("%s %s %s", c.StorageClassName, zone, c.Capacity)
		if c.MaximumVolumeSize != nil {
			s += "/" + c.MaximumVolumeSize.String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// expectCapacities waits until the published objects are exactly want.
func (e *env) expectCapacities(ns string, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	var got []string
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got = e.capacities(ns)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		e.t.Fatalf("CSIStorageCapacity objects %q, want %q", got, want)
	}
}

// TestCapacity: with topology, one object per segment of the driver's
// nodes and WaitForFirstConsumer class, refreshed at each poll and when
// classes go, owned by the provisioner's pod, written with exactly the
// deploy's RBAC; none for an Immediate class; another producer's object
// untouched.
func TestCapacity(t *testing.T) {
	e := newEnv(t, inProcessDriver, csidriver.Options{Topology: true})
	user, home, kubeconfig := e.deployUser()
	// The provisioner's pod, as the downward API would name it: the owner
	// at --capacity-ownerref-level=0. No kubelet runs it.
	pod, err := cp.Client.CoreV1().Pods(home).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-controller-0"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "csi-provisioner", Image: "csi-provisioner"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e.createNode("a", true)
	nodeB := e.createNode("b", true)
	e.createNode("c", false) // the driver does not run there: no segment
	e.inProcess.SetCapacity("", map[string]string{zoneKey: "a"}, 10<<30)
	e.inProcess.SetCapacity("", map[string]string{zoneKey: "b"}, 20<<30)
	e.inProcess.SetCapacity("", map[string]string{zoneKey: "c"}, 30<<30)
	wffc := e.createClass(nil, waitForFirstConsumer)
	immediate := e.createClass(nil)
	// Another producer's object for the same driver and class.
	foreign, err := cp.Client.StorageV1().CSIStorageCapacities(home).Create(e.ctx, &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Labels: map[string]string{
			driverNameLabel: e.name, managedByLabel: "external-provisioner-node-a",
		}},
		StorageClassName: wffc.Name,
		NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{zoneKey: "a"}},
		Capacity:         resource.NewQuantity(1, resource.BinarySI),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e.prov = e.startReplica(backend.Replica{Env: []string{"NAMESPACE=" + home, "POD_NAME=" + pod.Name}, Args: []string{
		"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + home,
		"--enable-capacity", "--capacity-poll-interval=2s", "--capacity-ownerref-level=0"}})
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	e.expectCapacities(home, wffc.Name+" a 10Gi", wffc.Name+" b 20Gi")
	list, err := cp.Client.StorageV1().CSIStorageCapacities(home).List(e.ctx, metav1.ListOptions{LabelSelector: driverNameLabel + "=" + e.name})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if c.Name == foreign.Name {
			continue
		}
		if c.Labels[managedByLabel] != "external-provisioner" || !strings.HasPrefix(c.Name, "csisc-") {
			t.Errorf("object %s: labels %v, want managed-by external-provisioner and a csisc- name", c.Name, c.Labels)
		}
		if refs := c.OwnerReferences; len(refs) != 1 || refs[0].UID != pod.UID || refs[0].Kind != "Pod" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("object %s: owner references %v, want the pod %s as controller", c.Name, refs, pod.Name)
		}
	}
	// What the driver was asked: the class's segment, as the driver's
	// topology keys on the node.
	if reqs := e.inProcess.CapacityRequests(); !slices.ContainsFunc(reqs, func(r *csi.GetCapacityRequest) bool {
		return r.GetAccessibleTopology().GetSegments()[zoneKey] == "b"
	}) {
		t.Errorf("no GetCapacity for zone b in %v", reqs)
	}

	t.Run("capacity changes are published at the next poll", func(t *testing.T) {
		e := e.on(t)
		e.inProcess.SetCapacity("", map[string]string{zoneKey: "a"}, 5<<30)
		e.inProcess.SetMaximumVolumeSize(4 << 30)
		e.expectCapacities(home, wffc.Name+" a 5Gi/4Gi", wffc.Name+" b 20Gi/4Gi")
		// A volume provisioned in zone b takes its room.
		_, pv := e.bound(e.createClaim(wffc.Name, "3Gi", selectedNode(nodeB)))
		if got := affinityZones(pv); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("volume in zones %v, want b", got)
		}
		e.expectCapacities(home, wffc.Name+" a 5Gi/4Gi", wffc.Name+" b 17Gi/4Gi")
	})

	t.Run("Immediate class gets no object", func(t *testing.T) {
		// Several polls have passed since both classes exist.
		for _, c := range e.capacities(home) {
			if strings.HasPrefix(c, immediate.Name+" ") {
				t.Errorf("object %q for Immediate class %s without --capacity-for-immediate-binding", c, immediate.Name)
			}
		}
	})

	t.Run("a deleted class loses its objects", func(t *testing.T) {
		e := e.on(t)
		if err := cp.Client.StorageV1().StorageClasses().Delete(e.ctx, wffc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.expectCapacities(home)
	})

	t.Run("another producer's object is left alone", func(t *testing.T) {
		got, err := cp.Client.StorageV1().CSIStorageCapacities(home).Get(e.ctx, foreign.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the other producer's object: %v", err)
		}
		if got.ResourceVersion != foreign.ResourceVersion {
			t.Errorf("the other producer's object was modified: %+v", got)
		}
	})

	if err := e.prov.Stop(); err != nil {
		t.Error(err)
	}
	cp.ExpectNoForbidden(t, user)
}

// TestCapacityWithoutTopology: a driver without topology gets one object
// per class valid on every node; --capacity-for-immediate-binding adds
// Immediate classes; the driver is asked with the class's parameters.
func TestCapacityWithoutTopology(t *testing.T) {
	e := newEnv(t, inProcessDriver, csidriver.Options{})
	e.inProcess.SetCapacity("", nil, 100<<30)
	e.inProcess.SetCapacity("fast", nil, 1<<30)
	wffc := e.createClass(map[string]string{csidriver.PoolParameter: "fast", "csi.storage.k8s.io/fstype": "xfs"}, waitForFirstConsumer)
	immediate := e.createClass(nil)
	e.prov = e.startReplica(backend.Replica{Env: []string{"NAMESPACE=" + e.ns}, Args: []string{
		"--enable-capacity", "--capacity-poll-interval=2s", "--capacity-ownerref-level=-1", "--capacity-for-immediate-binding"}})
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.expectCapacities(e.ns, wffc.Name+" * 1Gi", immediate.Name+" * 100Gi")
	for _, r := range e.inProcess.CapacityRequests() {
		if _, ok := r.GetParameters()["csi.storage.k8s.io/fstype"]; ok {
			t.Errorf("GetCapacity got the reserved parameters: %v", r.GetParameters())
		}
	}
}

// TestCapacityNeedsGetCapacity: --enable-capacity with a driver that cannot
// report capacity stops at start, saying why.
func TestCapacityNeedsGetCapacity(t *testing.T) {
	e := newEnv(t, anyDriver, csidriver.Options{ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	}})
	p := e.startProvisioner("--enable-capacity")
	if err := exitError(e.ctx, p); err == nil {
		t.Fatal("csi-provisioner exited without error")
	}
	if !p.HasLog("does not support GET_CAPACITY") {
		t.Errorf("no message about GET_CAPACITY in the log:\n%s", p.LogTail(20))
	}
}
