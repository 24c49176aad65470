// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

// cinderZone is the first available zone Cinder lists ("nova" unless the
// stack's default_availability_zone says otherwise).
func cinderZone(ctx context.Context, t *testing.T) string {
	t.Helper()
	pages, err := availabilityzones.List(volClient).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	zones, err := availabilityzones.ExtractAvailabilityZones(pages)
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range zones {
		if z.ZoneState.Available {
			return z.ZoneName
		}
	}
	t.Fatalf("Cinder lists no available zone: %+v", zones)
	return ""
}

// createZoneNode creates a Node object (no kubelet) labeled with zone, as a
// cloud controller manager labels nodes.
func createZoneNode(ctx context.Context, t *testing.T, name, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelTopologyZone: zone, corev1.LabelHostname: name,
	}}}
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// requiredZones returns the zones the PV's required node affinity allows
// for topology.kubernetes.io/zone, and whether that is all it requires.
func requiredZones(pv *corev1.PersistentVolume) ([]string, bool) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, false
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || len(terms[0].MatchFields) != 0 {
		return nil, false
	}
	e := terms[0].MatchExpressions[0]
	return e.Values, e.Key == corev1.LabelTopologyZone && e.Operator == corev1.NodeSelectorOpIn
}

// TestTopology: the zone of the volume comes from the node the scheduler
// selected (WaitForFirstConsumer) or from the class's allowedTopologies;
// Cinder creates it there, and the PV requires nodes of the zone Cinder
// reports. An availability parameter outside allowedTopologies is refused
// with an event, before Cinder is called.
func TestTopology(t *testing.T) {
	zone := cinderZone(framework.TestContext(t, testTimeout), t)
	t.Logf("Cinder's zone: %s", zone)
	cases := map[string]struct {
		class    func(sc *storagev1.StorageClass)
		selected bool
	}{
		"WaitForFirstConsumer with a selected node": {
			class: func(sc *storagev1.StorageClass) {
				sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
			},
			selected: true,
		},
		"allowedTopologies": {
			class: func(sc *storagev1.StorageClass) {
				sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: corev1.LabelTopologyZone, Values: []string{zone, "zone-elsewhere"}},
				}}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := framework.TestContext(t, testTimeout)
			ns := cp.CreateTestNamespace(t, "cinder-topology")
			sc := framework.NewStorageClass(ns, provisionerName, map[string]string{"type": "iscsi"})
			tc.class(sc)
			sc = cp.CreateTestStorageClass(t, sc)
			claim := framework.NewPVC(ns, "data", sc.Name, "1Gi")
			if tc.selected {
				createZoneNode(ctx, t, ns+"-node", zone)
				claim.Annotations = map[string]string{"volume.kubernetes.io/selected-node": ns + "-node"}
			}
			pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
			if err != nil {
				t.Fatal(err)
			}
			id := pv.Annotations[cinderprov.AnnVolumeID]
			vol, err := volumes.Get(ctx, volClient, id).Extract()
			if err != nil {
				t.Fatalf("Cinder volume %s: %v", id, err)
			}
			if vol.AvailabilityZone != zone {
				t.Errorf("Cinder volume's availability_zone = %q, want %q", vol.AvailabilityZone, zone)
			}
			if zones, ok := requiredZones(pv); !ok || !slices.Equal(zones, []string{zone}) {
				t.Errorf("PV node affinity = %+v, want %s In [%s]", pv.Spec.NodeAffinity, corev1.LabelTopologyZone, zone)
			}
			deleteClaim(ctx, t, pvc, pv.Name)
			assertVolumeGone(ctx, t, id)
		})
	}

	// A zone Cinder does not have, from the selected node: Cinder refuses
	// it, which shows the node's label is what Cinder is asked for.
	t.Run("selected node in a zone Cinder does not have", func(t *testing.T) {
		t.Parallel()
		ctx := framework.TestContext(t, testTimeout)
		ns := cp.CreateTestNamespace(t, "cinder-topology-nowhere")
		sc := framework.NewStorageClass(ns, provisionerName, map[string]string{"type": "iscsi"})
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		sc = cp.CreateTestStorageClass(t, sc)
		createZoneNode(ctx, t, ns+"-node", "zone-nowhere")
		claim := framework.NewPVC(ns, "data", sc.Name, "1Gi")
		claim.Annotations = map[string]string{"volume.kubernetes.io/selected-node": ns + "-node"}
		pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev := waitForEventContaining(ctx, t, pvc, "ProvisioningFailed", `availability zone "zone-nowhere"): cinder answered 400`)
		t.Logf("event: %s", ev.Message)
		if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := framework.WaitForPVCDeleted(ctx, cp.Client, ns, pvc.Name); err != nil {
			t.Fatal(err)
		}
		assertNoVolumesNamed(ctx, t, "pvc-"+string(pvc.UID))
	})

	t.Run("availability outside allowedTopologies", func(t *testing.T) {
		t.Parallel()
		ctx := framework.TestContext(t, testTimeout)
		ns := cp.CreateTestNamespace(t, "cinder-topology-bad")
		sc := framework.NewStorageClass(ns, provisionerName, map[string]string{"type": "iscsi", "availability": zone})
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"zone-elsewhere"}},
		}}}
		sc = cp.CreateTestStorageClass(t, sc)
		pvc := createPVC(ctx, t, ns, sc.Name)
		ev := waitForEventContaining(ctx, t, pvc, "ProvisioningFailed", `parameter availability "`+zone+`" is not one of the zones its allowedTopologies allow`)
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("event type = %s", ev.Type)
		}
		if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := framework.WaitForPVCDeleted(ctx, cp.Client, ns, pvc.Name); err != nil {
			t.Fatal(err)
		}
		assertNoVolumesNamed(ctx, t, "pvc-"+string(pvc.UID))
	})
}
