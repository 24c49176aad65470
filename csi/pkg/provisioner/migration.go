// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	csitranslation "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
)

// CSI migration: a driver that replaces an in-tree volume plugin
// (cinder.csi.openstack.org for kubernetes.io/cinder, ebs.csi.aws.com for
// kubernetes.io/aws-ebs, ...) also serves the classes that name the plugin.
// kube-controller-manager hands their claims to the driver (their
// storage-provisioner annotation names it) and marks their PVs
// pv.kubernetes.io/migrated-to it. Kubernetes' own translation library says
// which drivers these are and translates classes and PVs both ways, as the
// CSI external-provisioner does.

// migration translates for a driver that replaces an in-tree plugin.
type migration struct {
	translator csitranslation.CSITranslator
	// inTreeName is the in-tree plugin's name, the provisioner of the
	// classes to translate.
	inTreeName string
}

// newMigration returns the migration of the driver; nil if it replaces no
// in-tree plugin.
func newMigration(driver string) *migration {
	translator := csitranslation.New()
	if !translator.IsMigratedCSIDriverByName(driver) {
		return nil
	}
	inTree, err := translator.GetInTreeNameFromCSIName(driver)
	if err != nil {
		return nil // cannot happen: the driver was just found migrated
	}
	return &migration{translator: translator, inTreeName: inTree}
}

// InTreePluginName is the name of the in-tree volume plugin the driver
// replaces, whose StorageClasses it also serves; "" if there is none.
func (p *Provisioner) InTreePluginName() string {
	if p.migration == nil {
		return ""
	}
	return p.migration.inTreeName
}

// migrates reports whether the class names the in-tree plugin the driver
// replaces.
func (m *migration) migrates(class *storagev1.StorageClass) bool {
	return m != nil && class.Provisioner == m.inTreeName
}

// checkClaim refuses a claim that asks the in-tree plugin itself: its
// storage-provisioner annotation names the plugin and kube-controller-manager
// did not mark it migrated to this driver, so the plugin may provision it.
// Without migration there is no such plugin: every claim passes.
func (m *migration) checkClaim(claim *corev1.PersistentVolumeClaim, driver string) error {
	if m == nil {
		return nil
	}
	requested, ok := claim.Annotations[controller.AnnStorageProvisioner]
	if !ok {
		requested = claim.Annotations[controller.AnnBetaStorageProvisioner]
	}
	if requested == m.inTreeName && claim.Annotations[controller.AnnMigratedTo] != driver {
		return controller.Ignore("claim %s/%s asks the in-tree plugin %s, and is not marked %s=%s by kube-controller-manager",
			claim.Namespace, claim.Name, m.inTreeName, controller.AnnMigratedTo, driver)
	}
	return nil
}

// translateClass returns the class with the CSI driver's parameters and
// topology keys in place of the in-tree plugin's.
func (m *migration) translateClass(ctx context.Context, class *storagev1.StorageClass, driver string) (*storagev1.StorageClass, error) {
	translated, err := m.translator.TranslateInTreeStorageClassToCSI(klog.FromContext(ctx), m.inTreeName, class)
	if err != nil {
		return nil, fmt.Errorf("StorageClass %q of in-tree provisioner %s cannot be translated for CSI driver %s (CSI migration): %w: fix the class's parameters or allowedTopologies",
			class.Name, m.inTreeName, driver, err)
	}
	return translated, nil
}

// toInTree returns the PV of a migrated class's volume in the in-tree
// plugin's form, as kube-controller-manager and rollbacks expect it.
func (m *migration) toInTree(pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	inTree, err := m.translator.TranslateCSIPVToInTree(pv)
	if err != nil {
		return nil, fmt.Errorf("translating PersistentVolume %s to the in-tree form of %s: %w", pv.Name, m.inTreeName, err)
	}
	return inTree, nil
}

// toCSI returns a PV of the in-tree plugin in CSI form, to be deleted by
// its CSI source; any other PV as it is.
func (m *migration) toCSI(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	if m == nil || pv.Spec.CSI != nil {
		return pv, nil
	}
	if plugin, err := m.translator.GetInTreePluginNameFromSpec(pv, nil); err != nil || plugin != m.inTreeName {
		return pv, nil // another plugin's volume, not this driver's to delete
	}
	translated, err := m.translator.TranslateInTreePVToCSI(klog.FromContext(ctx), pv)
	if err != nil {
		return nil, fmt.Errorf("translating in-tree PersistentVolume %s to CSI: %w", pv.Name, err)
	}
	return translated, nil
}
