// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package resize

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewEventRecorder returns a recorder that writes events through client
// until ctx ends, as component (the provisioner's name: the events' source
// and reportingController, as on the events of lib/controller) and instance
// (their reportingInstance, such as the node name). lib/controller's own
// recorder is internal to it; client-go's is the one the CSI sidecars use.
func NewEventRecorder(ctx context.Context, client kubernetes.Interface, component, instance string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: instance})
}

// NewInformerFactory returns an informer factory for New: whole claims and
// PVs, less their managed fields (the Resizer writes with merge patches,
// never whole objects).
func NewInformerFactory(client kubernetes.Interface, resync time.Duration) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(stripManagedFields))
}

func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
