// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"testing"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/test/csidriver"
)

// What CSI migration puts on claims and PVs (kube-controller-manager) and
// the names of two migrated plugins and their drivers.
const (
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annMigratedTo         = "pv.kubernetes.io/migrated-to"
	cinderInTree          = "kubernetes.io/cinder"
	cinderDriver          = "cinder.csi.openstack.org"
	ebsInTree             = "kubernetes.io/aws-ebs"
	ebsDriver             = "ebs.csi.aws.com"
)

// TestInTreeClassMigration: the in-repo driver registered as Cinder's CSI
// driver serves a kubernetes.io/cinder class as the upstream sidecar does.
// kube-controller-manager hands the claim to the driver; the class's
// parameters reach CreateVolume translated (fsType as the volume's file
// system); the PV is in the in-tree form, marked migrated-to the driver by
// kube-controller-manager; deleting the claim deletes the volume through
// DeleteVolume. A PV the in-tree plugin made before the migration is
// deleted the same way.
func TestInTreeClassMigration(t *testing.T) {
	e := setupNamed(t, anyDriver, cinderDriver, csidriver.Options{})
	class := cp.CreateTestStorageClass(t, newInTreeClass(cinderInTree, map[string]string{"availability": "nova", "fsType": "xfs"}))

	claim := e.createClaim(class.Name, "1Gi")
	claim, pv := e.bound(claim)
	if got := claim.Annotations[annStorageProvisioner]; got != cinderDriver {
		t.Errorf("claim annotation %s = %q, want %q (kube-controller-manager names the CSI driver)", annStorageProvisioner, got, cinderDriver)
	}
	if pv.Spec.CSI != nil || pv.Spec.Cinder == nil {
		t.Fatalf("PV source %+v: want the in-tree cinder source, no CSI source", pv.Spec.PersistentVolumeSource)
	}
	vol, ok := e.driver.Volume(pv.Name)
	if !ok || pv.Spec.Cinder.VolumeID != vol.ID {
		t.Fatalf("PV cinder volumeID %q, driver volume %+v (found %v): want the driver's volume id", pv.Spec.Cinder.VolumeID, vol, ok)
	}
	if pv.Spec.Cinder.FSType != "xfs" {
		t.Errorf("PV cinder fsType %q, want the class's xfs", pv.Spec.Cinder.FSType)
	}
	if got := pv.Annotations[annProvisionedBy]; got != cinderInTree {
		t.Errorf("PV annotation %s = %q, want the class's provisioner %q", annProvisionedBy, got, cinderInTree)
	}
	e.eventually("kube-controller-manager to mark the PV "+annMigratedTo+"="+cinderDriver, func() bool {
		got, err := cp.Client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
		return err == nil && got.Annotations[annMigratedTo] == cinderDriver
	})
	req := e.driver.LastCreateRequest(pv.Name)
	if got := req.GetParameters(); len(got) != 1 || got["availability"] != "nova" {
		t.Errorf("CreateVolume parameters %v, want only availability=nova (fsType is the volume's file system)", got)
	}
	if fs := req.GetVolumeCapabilities()[0].GetMount().GetFsType(); fs != "xfs" {
		t.Errorf("CreateVolume file system %q, want xfs", fs)
	}

	e.deleteClaim(claim)
	e.pvGone(pv.Name)
	if _, ok := e.driver.Volume(pv.Name); ok {
		t.Fatal("the volume of the migrated PV was not deleted")
	}

	// A PV of the in-tree plugin from before the migration: provisioned by
	// kubernetes.io/cinder, in-tree source, bound to its claim.
	old := e.preBoundClaim(class.Name)
	oldPV := e.inTreeVolume(old, cinderInTree, e.driverVolume(old.Spec.VolumeName))
	e.bound(old)
	e.eventually("kube-controller-manager to mark the in-tree PV "+annMigratedTo+"="+cinderDriver, func() bool {
		got, err := cp.Client.CoreV1().PersistentVolumes().Get(e.ctx, oldPV.Name, metav1.GetOptions{})
		return err == nil && got.Annotations[annMigratedTo] == cinderDriver
	})
	e.deleteClaim(old)
	e.pvGone(oldPV.Name)
	e.deleted(oldPV.Spec.Cinder.VolumeID)
	e.noVolumeLeft()
}

// TestInTreeClassTranslation: as the driver of kubernetes.io/aws-ebs, a
// class like EKS's default gp2 is served, its PV an awsElasticBlockStore
// one; a class the translation library rejects gets a Warning event on the
// claim that names the class and the problem, and no volume is made.
func TestInTreeClassTranslation(t *testing.T) {
	e := setupNamed(t, anyDriver, ebsDriver, csidriver.Options{})
	gp2 := cp.CreateTestStorageClass(t, newInTreeClass(ebsInTree, map[string]string{"type": "gp2", "fsType": "ext4"}))
	_, pv := e.bound(e.createClaim(gp2.Name, "1Gi"))
	if pv.Spec.AWSElasticBlockStore == nil || pv.Spec.CSI != nil {
		t.Fatalf("PV source %+v: want the in-tree awsElasticBlockStore source", pv.Spec.PersistentVolumeSource)
	}
	if got := e.driver.LastCreateRequest(pv.Name).GetParameters(); len(got) != 1 || got["type"] != "gp2" {
		t.Errorf("CreateVolume parameters %v, want only type=gp2", got)
	}

	// zone and allowedTopologies together: the in-tree plugin refused it too.
	bad := cp.CreateTestStorageClass(t, newInTreeClass(ebsInTree, map[string]string{"zone": "us-east-1a"}, func(c *storagev1.StorageClass) {
		c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"us-east-1a"}},
		}}}
	}))
	claim := e.createClaim(bad.Name, "1Gi")
	e.event(claim, "ProvisioningFailed", bad.Name, ebsInTree, "cannot simultaneously set allowed topologies and zone/zones parameters")
	if req := e.driver.LastCreateRequest(pvName(claim)); req != nil {
		t.Fatalf("CreateVolume called for a class that cannot be translated: %v", req)
	}
}

// TestUnprovisionedVolumesDeleted: as the upstream sidecar (sig-storage-lib
// v13), PVs an admin created are deleted through DeleteVolume once Released
// with reclaim policy Delete: a CSI PV of the driver and, for Cinder's
// driver, a cinder PV the admin marked migrated-to it. A CSI PV of another
// driver, and one of the driver with reclaim policy Retain, are left with
// their volumes.
func TestUnprovisionedVolumesDeleted(t *testing.T) {
	e := setupNamed(t, anyDriver, cinderDriver, csidriver.Options{})
	class := e.createClass(nil)
	static := func(driver string, policy corev1.PersistentVolumeReclaimPolicy) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, string) {
		claim := e.preBoundClaim(class.Name)
		id := e.driverVolume(claim.Spec.VolumeName)
		pv := e.createStaticVolume(claim, policy, corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: driver, VolumeHandle: id, FSType: "ext4",
		}}, nil)
		return claim, pv, id
	}
	ours, oursPV, oursID := static(cinderDriver, corev1.PersistentVolumeReclaimDelete)
	other, otherPV, otherID := static("other.test.kubeprov.io", corev1.PersistentVolumeReclaimDelete)
	retained, retainedPV, retainedID := static(cinderDriver, corev1.PersistentVolumeReclaimRetain)
	migrated := e.preBoundClaim(class.Name)
	migratedID := e.driverVolume(migrated.Spec.VolumeName)
	migratedPV := e.createStaticVolume(migrated, corev1.PersistentVolumeReclaimDelete,
		corev1.PersistentVolumeSource{Cinder: &corev1.CinderPersistentVolumeSource{VolumeID: migratedID}},
		map[string]string{annMigratedTo: cinderDriver})

	for _, c := range []*corev1.PersistentVolumeClaim{ours, other, retained, migrated} {
		e.bound(c)
		e.deleteClaim(c)
	}
	e.pvGone(oursPV.Name)
	e.deleted(oursID)
	e.pvGone(migratedPV.Name)
	e.deleted(migratedID)
	for _, pv := range []*corev1.PersistentVolume{otherPV, retainedPV} {
		if _, err := cp.Client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("PV %s (driver %s, reclaim %s): %v; want it left", pv.Name, pv.Spec.CSI.Driver, pv.Spec.PersistentVolumeReclaimPolicy, err)
		}
	}
	for _, id := range []string{otherID, retainedID} {
		for _, req := range e.driver.DeleteRequests() {
			if req.GetVolumeId() == id {
				t.Errorf("DeleteVolume %s called for a PV that is not the driver's to delete", id)
			}
		}
	}
}

// newInTreeClass is a StorageClass of an in-tree plugin.
func newInTreeClass(plugin string, params map[string]string, mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("intree")}, Provisioner: plugin, Parameters: params}
	for _, m := range mutate {
		m(class)
	}
	return class
}

// preBoundClaim creates a claim of the class bound by name to a PV still
// to be created, which no provisioner provisions.
func (e *env) preBoundClaim(class string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	name := uniqueName("static")
	return e.createClaim(class, "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = name })
}

// driverVolume creates a 1 GiB volume of the name in the driver directly,
// as an admin or another provisioner would, and returns its id.
func (e *env) driverVolume(name string) string {
	e.t.Helper()
	conn, err := connection.Dial(e.socket)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	vol, err := createGiBVolume(ctx, csispec.NewControllerClient(conn), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return vol.GetVolumeId()
}

// createGiBVolume asks the driver for a 1 GiB single-node volume of the name.
func createGiBVolume(ctx context.Context, driver csispec.ControllerClient, name string) (*csispec.Volume, error) {
	rsp, err := driver.CreateVolume(ctx, &csispec.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csispec.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csispec.VolumeCapability{{
			AccessType: &csispec.VolumeCapability_Mount{Mount: &csispec.VolumeCapability_MountVolume{}},
			AccessMode: &csispec.VolumeCapability_AccessMode{Mode: csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	})
	return rsp.GetVolume(), err
}

// inTreeVolume creates the PV an in-tree plugin made for the claim before
// CSI migration: provisioned-by the plugin, a cinder source.
func (e *env) inTreeVolume(claim *corev1.PersistentVolumeClaim, plugin, volumeID string) *corev1.PersistentVolume {
	return e.createStaticVolume(claim, corev1.PersistentVolumeReclaimDelete,
		corev1.PersistentVolumeSource{Cinder: &corev1.CinderPersistentVolumeSource{VolumeID: volumeID}},
		map[string]string{annProvisionedBy: plugin})
}

// createStaticVolume creates the PV a pre-bound claim names, with the source, reclaim
// policy and annotations, and deletes what is left of it when the test ends.
func (e *env) createStaticVolume(claim *corev1.PersistentVolumeClaim, policy corev1.PersistentVolumeReclaimPolicy,
	source corev1.PersistentVolumeSource, annotations map[string]string) *corev1.PersistentVolume {
	e.t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Spec.VolumeName, Annotations: annotations},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: policy,
			StorageClassName:              *claim.Spec.StorageClassName,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeSource: source,
		},
	}
	pv, err := cp.Client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cp.Client.CoreV1().PersistentVolumes().Delete(context.WithoutCancel(e.ctx), pv.Name, metav1.DeleteOptions{})
	})
	return pv
}

// deleted waits until the driver got a DeleteVolume for the volume id and
// no longer holds it.
func (e *env) deleted(id string) {
	e.t.Helper()
	e.eventually("DeleteVolume "+id, func() bool {
		for _, req := range e.driver.DeleteRequests() {
			if req.GetVolumeId() == id {
				for _, v := range e.driver.Volumes() {
					if v.ID == id {
						return false
					}
				}
				return true
			}
		}
		return false
	})
}
