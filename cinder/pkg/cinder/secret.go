// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// ensureSecret creates the per-volume Secret, or updates the one an earlier
// attempt for the same PV left (Cinder may hand out new credentials). A
// Secret of that name that is not ours is never touched.
func (p *Provisioner) ensureSecret(ctx context.Context, s *corev1.Secret, pvName string) error {
	s = s.DeepCopy()
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[LabelManagedBy] = ManagedBy
	s.Labels[LabelPV] = pvName
	client := p.kube.CoreV1().Secrets(s.Namespace)
	_, err := client.Create(ctx, s, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s with the volume's CHAP credentials: %w", s.Namespace, s.Name, err)
	}
	old, err := client.Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if old.Labels[LabelPV] != pvName {
		return fmt.Errorf("secret %s/%s exists and does not belong to PV %s (label %s): it is left alone; delete or rename it", s.Namespace, s.Name, pvName, LabelPV)
	}
	old = old.DeepCopy()
	old.Type, old.Data, old.StringData = s.Type, s.Data, nil
	if _, err := client.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating Secret %s/%s with the volume's CHAP credentials: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// deleteSecret deletes the Secret ref ("namespace/name") if it belongs to
// pvName; gone already is fine.
func (p *Provisioner) deleteSecret(ctx context.Context, ref, pvName string) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		klog.FromContext(ctx).Info("Ignoring malformed annotation", "annotation", AnnAuthSecret, "value", ref)
		return nil
	}
	client := p.kube.CoreV1().Secrets(ns)
	s, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s: %w", ref, err)
	}
	if s.Labels[LabelPV] != pvName {
		klog.FromContext(ctx).Info("Not deleting a Secret that does not belong to this PV", "secret", ref, "label", LabelPV)
		return nil
	}
	err = client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Secret %s: %w", ref, err)
	}
	return nil
}
