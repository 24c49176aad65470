// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
)

// ownerResources are the kinds an owner chain can be walked through: those
// that run pods. Only their metadata is read (get).
var ownerResources = map[schema.GroupKind]string{
	{Group: "", Kind: "Pod"}:             "pods",
	{Group: "apps", Kind: "ReplicaSet"}:  "replicasets",
	{Group: "apps", Kind: "StatefulSet"}: "statefulsets",
	{Group: "apps", Kind: "DaemonSet"}:   "daemonsets",
	{Group: "apps", Kind: "Deployment"}:  "deployments",
	{Group: "batch", Kind: "Job"}:        "jobs",
	{Group: "batch", Kind: "CronJob"}:    "cronjobs",
}

// Owner returns the owner reference for the objects: at level 0 the pod
// podName in namespace, at level n the controller of the owner at level
// n-1 (1: the pod's ReplicaSet, StatefulSet or DaemonSet; 2: a
// ReplicaSet's Deployment). Only the objects below the level are read, so
// level 1 needs get on pods only, level 2 also on the level-1 kind.
func Owner(ctx context.Context, client metadata.Interface, namespace, podName string, level int) (*metav1.OwnerReference, error) {
	if level < 0 {
		return nil, nil
	}
	if podName == "" {
		return nil, fmt.Errorf("the owner of CSIStorageCapacity objects is found from the provisioner's pod, " +
			"named by the POD_NAME environment variable, which is not set: set it from the downward API (metadata.name), " +
			"or use --capacity-ownerref-level=-1 for objects without owner")
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: podName}
	for i := 0; ; i++ {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("owner %s %s: %w", ref.Kind, ref.Name, err)
		}
		resource, ok := ownerResources[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
		if !ok {
			return nil, fmt.Errorf("--capacity-ownerref-level=%d: the owner at level %d is %s %s, whose owners are not looked up; use a lower level",
				level, i, ref.Kind, ref.Name)
		}
		obj, err := client.Resource(gv.WithResource(resource)).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("finding the owner of CSIStorageCapacity objects (--capacity-ownerref-level=%d): reading %s %s/%s: %w",
				level, ref.Kind, namespace, ref.Name, err)
		}
		if i == 0 {
			ref.UID = obj.UID
		}
		if i == level {
			ref.Controller = ptr.To(true)
			return &ref, nil
		}
		next := metav1.GetControllerOfNoCopy(obj)
		if next == nil {
			return nil, fmt.Errorf("--capacity-ownerref-level=%d: %s %s/%s (level %d) has no controller; use level %d",
				level, ref.Kind, namespace, ref.Name, i, i)
		}
		ref = metav1.OwnerReference{APIVersion: next.APIVersion, Kind: next.Kind, Name: next.Name, UID: next.UID}
		if i+1 == level {
			ref.Controller = ptr.To(true)
			return &ref, nil
		}
	}
}
