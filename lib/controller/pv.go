// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"maps"

	"github.com/kubeprov/external-storage/lib/internal/cachedecode"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations and labels the controller reads and writes.
const (
	// AnnProvisionedBy names the provisioner that created a PV: the
	// provisioner of its StorageClass.
	AnnProvisionedBy = cachedecode.AnnProvisionedBy // "pv.kubernetes.io/provisioned-by"
	// AnnMigratedTo is set by kube-controller-manager on claims and PVs of
	// an in-tree volume plugin migrated to CSI: the CSI driver that now
	// provisions and deletes them.
	AnnMigratedTo = "pv.kubernetes.io/migrated-to"
	// AnnStorageProvisioner is set on claims by kube-controller-manager.
	AnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// AnnBetaStorageProvisioner is the older spelling of AnnStorageProvisioner.
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnSelectedNode is set on WaitForFirstConsumer claims by the scheduler.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// LabelHostname is the node label node-local volumes are pinned to.
	LabelHostname = "kubernetes.io/hostname"
)

// VolumeSpec is what only the provisioner knows about a new volume; NewVolume
// fills in the rest from the claim and its class.
type VolumeSpec struct {
	// Source is the volume source: the only required field.
	Source corev1.PersistentVolumeSource
	// Capacity of the asset; zero means the claim's request.
	Capacity resource.Quantity
	// NodeAffinity restricts where the volume can be used; nil means anywhere.
	NodeAffinity *corev1.VolumeNodeAffinity
	// Annotations are added to the PV (for example what Delete will need).
	Annotations map[string]string
}

// NewVolume returns the PV for this claim: name, claim reference, class,
// reclaim policy, mount options, access modes, volume mode and capacity come
// from the options, the rest from spec. Provisioners that build PVs by hand
// routinely forget reclaim policy and mount options; this does not.
func (o ProvisionOptions) NewVolume(spec VolumeSpec) *corev1.PersistentVolume {
	capacity := spec.Capacity
	if capacity.IsZero() {
		capacity = o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.PVName,
			Annotations: maps.Clone(spec.Annotations),
		},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            append([]corev1.PersistentVolumeAccessMode(nil), o.PVC.Spec.AccessModes...),
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: capacity},
			PersistentVolumeSource: spec.Source,
			VolumeMode:             o.PVC.Spec.VolumeMode,
			NodeAffinity:           spec.NodeAffinity,
		},
	}
	if o.StorageClass != nil {
		pv.Spec.StorageClassName = o.StorageClass.Name
		pv.Spec.MountOptions = append([]string(nil), o.StorageClass.MountOptions...)
		if o.StorageClass.ReclaimPolicy != nil {
			pv.Spec.PersistentVolumeReclaimPolicy = *o.StorageClass.ReclaimPolicy
		}
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	}
	pv.Spec.ClaimRef = claimRef(o.PVC)
	return pv
}

// NodeAffinityForHostname pins a volume to the node with the given
// kubernetes.io/hostname label, as node-local volumes must be.
func NodeAffinityForHostname(hostname string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{
		Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key:      LabelHostname,
					Operator: corev1.NodeSelectorOpIn,
					Values:   []string{hostname},
				}},
			}},
		},
	}
}

func claimRef(claim *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind:            "PersistentVolumeClaim",
		APIVersion:      "v1",
		Namespace:       claim.Namespace,
		Name:            claim.Name,
		UID:             claim.UID,
		ResourceVersion: claim.ResourceVersion,
	}
}
