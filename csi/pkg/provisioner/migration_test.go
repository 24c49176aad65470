// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
)

const (
	cinderDriver = "cinder.csi.openstack.org"
	cinderInTree = "kubernetes.io/cinder"
	ebsDriver    = "ebs.csi.aws.com"
	ebsInTree    = "kubernetes.io/aws-ebs"
)

func inTreeOptions(claim *corev1.PersistentVolumeClaim, plugin string, params map[string]string, mutate ...func(*storagev1.StorageClass)) controller.ProvisionOptions {
	o := options(claim, params, mutate...)
	o.StorageClass.Provisioner = plugin
	return o
}

// migratedClaim is a claim as kube-controller-manager hands it to the CSI
// driver of an in-tree class.
func migratedClaim(driver string) *corev1.PersistentVolumeClaim {
	return newClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations[controller.AnnStorageProvisioner] = driver })
}

func TestInTreeClassIsTranslated(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, fc := newTestProvisioner(t, Config{DriverName: cinderDriver})
	if got := p.InTreePluginName(); got != cinderInTree {
		t.Fatalf("InTreePluginName() = %q, want %q", got, cinderInTree)
	}
	pv, _, err := p.Provision(ctx, inTreeOptions(migratedClaim(cinderDriver), cinderInTree, map[string]string{"availability": "nova", "fsType": "xfs"}))
	if err != nil {
		t.Fatal(err)
	}
	req := fc.creates[0]
	if got := req.GetParameters(); len(got) != 1 || got["availability"] != "nova" {
		t.Errorf("CreateVolume parameters %v, want only availability=nova", got)
	}
	if fs := req.GetVolumeCapabilities()[0].GetMount().GetFsType(); fs != "xfs" {
		t.Errorf("CreateVolume file system %q, want xfs", fs)
	}
	if pv.Spec.CSI != nil || pv.Spec.Cinder == nil || pv.Spec.Cinder.VolumeID != "vol-"+req.Name || pv.Spec.Cinder.FSType != "xfs" {
		t.Fatalf("PV source %+v, want cinder volume vol-%s with fsType xfs", pv.Spec.PersistentVolumeSource, req.Name)
	}
	if pv.Annotations[AnnDeletionSecretName] != "" || pv.Spec.StorageClassName != "fast" {
		t.Errorf("PV annotations %v, class %q: want the deletion-secret annotations and the class kept", pv.Annotations, pv.Spec.StorageClassName)
	}

	// The class of another provisioner name is not translated.
	if _, _, err := p.Provision(ctx, options(migratedClaim(cinderDriver), map[string]string{"fsType": "xfs"})); err != nil {
		t.Fatal(err)
	}
	if got := fc.creates[1].GetParameters(); got["fsType"] != "xfs" {
		t.Errorf("CreateVolume parameters %v of a CSI class: want fsType passed unchanged", got)
	}
}

func TestUntranslatableClassIsReported(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, fc := newTestProvisioner(t, Config{DriverName: ebsDriver})
	o := inTreeOptions(migratedClaim(ebsDriver), ebsInTree, map[string]string{"zone": "us-east-1a"}, func(c *storagev1.StorageClass) {
		c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"us-east-1b"}},
		}}}
	})
	_, state, err := p.Provision(ctx, o)
	if err == nil || state != controller.ProvisioningNoChange {
		t.Fatalf("Provision: state %v, error %v; want NoChange and an error", state, err)
	}
	for _, part := range []string{`StorageClass "fast"`, ebsInTree, ebsDriver, "cannot simultaneously set allowed topologies and zone/zones parameters"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %q", err, part)
		}
	}
	if len(fc.creates) != 0 {
		t.Fatal("CreateVolume called for a class that cannot be translated")
	}
}

// A claim that names the in-tree plugin itself is the plugin's until
// kube-controller-manager marks it migrated to the driver.
func TestClaimOfTheInTreePlugin(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, fc := newTestProvisioner(t, Config{DriverName: cinderDriver})
	claim := migratedClaim(cinderInTree)
	if _, _, err := p.Provision(ctx, inTreeOptions(claim, cinderInTree, nil)); !controller.IsIgnored(err) || len(fc.creates) != 0 {
		t.Fatalf("claim not migrated: error %v, %d CreateVolume calls; want ignored, none", err, len(fc.creates))
	}
	claim.Annotations[controller.AnnMigratedTo] = cinderDriver
	if _, _, err := p.Provision(ctx, inTreeOptions(claim, cinderInTree, nil)); err != nil {
		t.Fatalf("claim marked migrated-to the driver: %v", err)
	}
}

func TestInTreeVolumeDeletedThroughCSI(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, fc := newTestProvisioner(t, Config{DriverName: cinderDriver})
	inTree := func(source corev1.PersistentVolumeSource) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: source}}
	}
	if err := p.Delete(ctx, inTree(corev1.PersistentVolumeSource{Cinder: &corev1.CinderPersistentVolumeSource{VolumeID: "vol-1"}})); err != nil {
		t.Fatal(err)
	}
	if len(fc.deletes) != 1 || fc.deletes[0].GetVolumeId() != "vol-1" {
		t.Fatalf("DeleteVolume requests %v, want one for vol-1", fc.deletes)
	}
	// Another plugin's volume is not this driver's.
	ebs := inTree(corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0123456789abcdef0"}})
	if err := p.Delete(ctx, ebs); !controller.IsIgnored(err) || len(fc.deletes) != 1 {
		t.Fatalf("EBS PV: error %v, %d DeleteVolume calls; want ignored, no call", err, len(fc.deletes))
	}

	// A driver that replaces no plugin leaves in-tree PVs alone.
	plain, plainFC := newTestProvisioner(t, Config{})
	if err := plain.Delete(ctx, inTree(corev1.PersistentVolumeSource{Cinder: &corev1.CinderPersistentVolumeSource{VolumeID: "vol-1"}})); !controller.IsIgnored(err) || len(plainFC.deletes) != 0 {
		t.Fatalf("driver %s: error %v, %d DeleteVolume calls; want ignored, none", testDriver, err, len(plainFC.deletes))
	}
	if plain.InTreePluginName() != "" {
		t.Fatalf("InTreePluginName() = %q for %s, want none", plain.InTreePluginName(), testDriver)
	}
}
