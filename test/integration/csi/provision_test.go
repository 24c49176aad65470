// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/csidriver"
)

// TestProvisionAndDelete: the whole life of a volume, as a user sees it and
// as the driver does.
func TestProvisionAndDelete(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	class := e.createClass(map[string]string{"type": "fast"}, func(c *storagev1.StorageClass) { c.MountOptions = []string{"noatime"} })
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))

	vol, ok := e.driver.Volume(pv.Name)
	switch {
	case pv.Name != pvName(claim):
		t.Errorf("PV name %s, want %s", pv.Name, pvName(claim))
	case !ok:
		t.Fatalf("the driver has no volume %s", pv.Name)
	case pv.Spec.CSI == nil || pv.Spec.CSI.Driver != e.name || pv.Spec.CSI.VolumeHandle != vol.ID || pv.Spec.CSI.FSType != "":
		t.Errorf("CSI source %+v, want driver %s and handle %s", pv.Spec.CSI, e.name, vol.ID)
	case pv.Spec.CSI.VolumeAttributes["volumeName"] != pv.Name:
		t.Errorf("volume attributes %v do not come from the volume context", pv.Spec.CSI.VolumeAttributes)
	case pv.Annotations["pv.kubernetes.io/provisioned-by"] != e.name:
		t.Errorf("provisioned-by %q", pv.Annotations["pv.kubernetes.io/provisioned-by"])
	case pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || !slices.Equal(pv.Spec.MountOptions, []string{"noatime"}):
		t.Errorf("reclaim policy %s, mount options %v", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.MountOptions)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("capacity %s, want 1Gi", got.String())
	}
	req := e.driver.LastCreateRequest(pv.Name)
	if !maps.Equal(req.GetParameters(), map[string]string{"type": "fast"}) {
		t.Errorf("parameters %v, want only the class's own", req.GetParameters())
	}
	if req.GetCapacityRange().GetRequiredBytes() != 1<<30 {
		t.Errorf("capacity range %v", req.GetCapacityRange())
	}
	if caps := req.GetVolumeCapabilities(); len(caps) != 1 ||
		caps[0].GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER ||
		!slices.Equal(caps[0].GetMount().GetMountFlags(), []string{"noatime"}) {
		t.Errorf("capabilities %v", caps)
	}
	e.event(claim, "ProvisioningSucceeded", pv.Name)

	e.deleteClaim(claim)
	e.pvGone(pv.Name)
	e.noVolumeLeft()
	if n := len(e.driver.DeleteRequests()); n != 1 {
		t.Errorf("%d DeleteVolume calls, want 1", n)
	}
}

// TestVolumeShape: access modes, volume mode and filesystem become the
// request's capabilities and the PV's fields.
func TestVolumeShape(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	}}, "--default-fstype=ext4")
	xfs := e.createClass(map[string]string{"csi.storage.k8s.io/fstype": "xfs"})
	plain := e.createClass(nil)
	const (
		snmw = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		snsw = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		mnmw = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		mnro = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	)
	tests := []struct {
		name      string
		class     string
		modes     []corev1.PersistentVolumeAccessMode
		block     bool
		wantFS    string
		wantModes []csi.VolumeCapability_AccessMode_Mode
	}{
		{name: "class fstype", class: xfs.Name, modes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, wantFS: "xfs", wantModes: []csi.VolumeCapability_AccessMode_Mode{snmw}},
		{name: "default fstype", class: plain.Name, modes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, wantFS: "ext4", wantModes: []csi.VolumeCapability_AccessMode_Mode{snmw}},
		{name: "block, one pod", class: xfs.Name, modes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, block: true, wantModes: []csi.VolumeCapability_AccessMode_Mode{snsw}},
		{name: "shared", class: plain.Name, modes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany}, wantFS: "ext4", wantModes: []csi.VolumeCapability_AccessMode_Mode{mnmw, mnro}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := e.on(t)
			claim := e.createClaim(tc.class, "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.AccessModes = tc.modes
				if tc.block {
					c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
				}
			})
			_, pv := e.bound(claim)
			if pv.Spec.CSI.FSType != tc.wantFS {
				t.Errorf("PV fsType %q, want %q", pv.Spec.CSI.FSType, tc.wantFS)
			}
			if got := *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock; got != tc.block {
				t.Errorf("PV volumeMode %s", *pv.Spec.VolumeMode)
			}
			caps := e.driver.LastCreateRequest(pv.Name).GetVolumeCapabilities()
			var modes []csi.VolumeCapability_AccessMode_Mode
			for _, c := range caps {
				modes = append(modes, c.GetAccessMode().GetMode())
				if (c.GetBlock() != nil) != tc.block || (!tc.block && c.GetMount().GetFsType() != tc.wantFS) {
					t.Errorf("capability %v, want block=%v fsType %q", c, tc.block, tc.wantFS)
				}
			}
			if !slices.Equal(modes, tc.wantModes) {
				t.Errorf("access modes %v, want %v", modes, tc.wantModes)
			}
			if v, _ := e.driver.Volume(pv.Name); v.Block != tc.block {
				t.Errorf("driver volume block=%v", v.Block)
			}
		})
	}
}

// TestNamesAndMetadata: the volume name flags, --extra-create-metadata and
// the forwarded claim labels and annotations.
func TestNamesAndMetadata(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{}, "--volume-name-prefix=vol", "--volume-name-uuid-length=12", "--extra-create-metadata",
		"--forward-pvc-labels=team,absent", "--forward-pvc-annotations=example.com/cost-center")
	class := e.createClass(map[string]string{"type": "fast"})
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Labels = map[string]string{"team": "storage", "private": "not-forwarded"}
		c.Annotations = map[string]string{"example.com/cost-center": "42", "example.com/secret-plan": "not forwarded"}
	}))
	// As upstream: the uid's dashes go before it is cut.
	if want := "vol-" + strings.ReplaceAll(string(claim.UID), "-", "")[:12]; pv.Name != want {
		t.Errorf("PV name %s, want %s", pv.Name, want)
	}
	want := map[string]string{
		"type":                               "fast",
		"csi.storage.k8s.io/pvc/name":        claim.Name,
		"csi.storage.k8s.io/pvc/namespace":   claim.Namespace,
		"csi.storage.k8s.io/pv/name":         pv.Name,
		"csi.storage.k8s.io/pvc/labels/team": "storage",
		"csi.storage.k8s.io/pvc/annotations/example.com/cost-center": "42",
	}
	if got := e.driver.LastCreateRequest(pv.Name).GetParameters(); !maps.Equal(got, want) {
		t.Errorf("parameters %v, want %v", got, want)
	}
}
