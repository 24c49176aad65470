// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// mutableParameters are the parameters of the claim's
// VolumeAttributesClass, which CreateVolume gets as mutable_parameters;
// nil when the claim names none.
func (p *Provisioner) mutableParameters(ctx context.Context, claim *corev1.PersistentVolumeClaim) (map[string]string, error) {
	name := ptr.Deref(claim.Spec.VolumeAttributesClassName, "")
	if name == "" || p.cfg.IgnoreVolumeAttributesClass {
		return nil, nil
	}
	vac, err := p.cfg.Client.StorageV1().VolumeAttributesClasses().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("VolumeAttributesClass %q not found: create it or fix the claim's spec.volumeAttributesClassName", name)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("csi-provisioner may not read VolumeAttributesClass %q: grant it get on volumeattributesclasses", name)
	case err != nil:
		return nil, fmt.Errorf("reading VolumeAttributesClass %q: %w", name, err)
	case vac.DriverName != p.cfg.DriverName:
		return nil, fmt.Errorf("VolumeAttributesClass %q is for driver %s, not %s: name a class of this driver in spec.volumeAttributesClassName", name, vac.DriverName, p.cfg.DriverName)
	}
	out := maps.Clone(vac.Parameters)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}
