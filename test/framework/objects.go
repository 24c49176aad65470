// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// CreateNamespace creates a namespace with a generated name starting with prefix
// and returns its name.
func CreateNamespace(ctx context.Context, c kubernetes.Interface, prefix string) (string, error) {
	if !strings.HasSuffix(prefix, "-") {
		prefix += "-"
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	ns, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating namespace %s*: %w", prefix, err)
	}
	return ns.Name, nil
}

// DeleteNamespace deletes a namespace and, because no namespace controller runs,
// finalizes it itself so that it goes away instead of staying Terminating.
// Objects still inside are not deleted: they stay in etcd, so delete them first
// if anything lists them across namespaces.
func DeleteNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	nsClient := c.CoreV1().Namespaces()
	if err := nsClient.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	ns, err := nsClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("getting namespace %s: %w", name, err)
	}
	// What the namespace controller does once the namespace is empty: drop the
	// "kubernetes" finalizer, then delete again, which now removes it.
	ns.Spec.Finalizers = nil
	if _, err := nsClient.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalizing namespace %s: %w", name, err)
	}
	if err := nsClient.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting finalized namespace %s: %w", name, err)
	}
	return nil
}

// NewStorageClass returns a StorageClass with Immediate binding and reclaim policy
// Delete. Callers tweak the other fields.
func NewStorageClass(name, provisioner string, params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		Parameters:        params,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// NewPVC returns a ReadWriteOnce, Filesystem PVC requesting size (a quantity such
// as "1Gi"; an invalid one panics, as it is a bug in the test). class is always
// set: "" explicitly asks for no StorageClass, as for a pre-created PV.
func NewPVC(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
}

// NewPV returns a ReadWriteOnce, Filesystem PV of the given size (as in NewPVC)
// and class with reclaim policy Retain and a hostPath source, which no controller
// here acts on. Set Spec.ClaimRef to pre-bind it to a PVC.
func NewPV(name, class, size string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/kubeprov-framework/" + name},
			},
		},
	}
}
