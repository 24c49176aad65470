// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// sync brings the object of it up to date: created or updated when its
// room is known and differs from what it says, deleted when it should not
// exist. An object of that name that is not this publisher's is left
// alone.
func (p *Publisher) sync(ctx context.Context, it item) error {
	existing, err := p.existing(it)
	if err != nil {
		return err
	}
	r, ok, why, err := p.desired(it)
	if err != nil {
		return err
	}
	p.noteSkipped(ctx, it, why)
	switch {
	case !ok && existing == nil:
		return nil
	case !ok:
		return p.delete(ctx, existing)
	case existing == nil:
		return p.create(ctx, it, r)
	case r.says(existing):
		return nil
	}
	return p.update(ctx, existing, r)
}

// existing is the cached object of it, nil when there is none or when the
// one of its name is not this publisher's.
func (p *Publisher) existing(it item) (*storagev1.CSIStorageCapacity, error) {
	obj, found, err := p.objects.GetByKey(p.cfg.Namespace + "/" + p.Name(it.class, it.node))
	if err != nil || !found {
		return nil, err
	}
	csc, ok := obj.(*storagev1.CSIStorageCapacity)
	if !ok {
		return nil, nil
	}
	if got, ours := p.owns(csc); !ours || got != it {
		// Never touched: its labels claim it is ours, its name and item
		// say otherwise.
		return nil, fmt.Errorf("CSIStorageCapacity %s has this provisioner's labels and the name of its object for StorageClass %s on node %s, but is for StorageClass %q on node %q: it is left alone; delete it",
			klog.KObj(csc), it.class, it.node, csc.StorageClassName, csc.Annotations[AnnNode])
	}
	return csc, nil
}

// noteSkipped logs, once per item until it is published again, why an
// item has no object.
func (p *Publisher) noteSkipped(ctx context.Context, it item, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if why == "" {
		delete(p.skipped, it)
		return
	}
	if p.skipped[it] == why {
		return
	}
	p.skipped[it] = why
	klog.FromContext(ctx).Info("Not publishing storage capacity", "storageClass", it.class, "node", it.node, "reason", why)
}

func (p *Publisher) create(ctx context.Context, it item, r room) error {
	csc := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{
			Name:        p.Name(it.class, it.node),
			Namespace:   p.cfg.Namespace,
			Labels:      p.objectLabels(it),
			Annotations: map[string]string{AnnNode: it.node},
		},
		StorageClassName:  it.class,
		NodeTopology:      &metav1.LabelSelector{MatchLabels: maps.Clone(r.topology)},
		Capacity:          quantity(r.total),
		MaximumVolumeSize: quantity(r.largest),
	}
	created, err := p.cfg.Client.StorageV1().CSIStorageCapacities(p.cfg.Namespace).Create(ctx, csc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating CSIStorageCapacity %s for StorageClass %s on node %s: %w", klog.KObj(csc), it.class, it.node, err)
	}
	p.writes.WithLabelValues("create").Inc()
	// Known at once, so that the next sync does not create it again before
	// the watch delivers it.
	_ = p.objects.Add(created)
	klog.FromContext(ctx).V(2).Info("Created CSIStorageCapacity", "object", klog.KObj(created), "storageClass", it.class,
		"node", it.node, "capacity", created.Capacity, "maximumVolumeSize", created.MaximumVolumeSize)
	return nil
}

func (p *Publisher) update(ctx context.Context, old *storagev1.CSIStorageCapacity, r room) error {
	csc := old.DeepCopy()
	csc.NodeTopology = &metav1.LabelSelector{MatchLabels: maps.Clone(r.topology)}
	csc.Capacity, csc.MaximumVolumeSize = quantity(r.total), quantity(r.largest)
	updated, err := p.cfg.Client.StorageV1().CSIStorageCapacities(p.cfg.Namespace).Update(ctx, csc, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating CSIStorageCapacity %s: %w", klog.KObj(csc), err)
	}
	p.writes.WithLabelValues("update").Inc()
	_ = p.objects.Update(updated)
	klog.FromContext(ctx).V(4).Info("Updated CSIStorageCapacity", "object", klog.KObj(updated), "capacity", updated.Capacity,
		"maximumVolumeSize", updated.MaximumVolumeSize)
	return nil
}

// delete removes an object of this publisher, only the one it read (UID).
func (p *Publisher) delete(ctx context.Context, csc *storagev1.CSIStorageCapacity) error {
	err := p.cfg.Client.StorageV1().CSIStorageCapacities(csc.Namespace).Delete(ctx, csc.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &csc.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting CSIStorageCapacity %s: %w", klog.KObj(csc), err)
	}
	if err == nil {
		p.writes.WithLabelValues("delete").Inc()
	}
	_ = p.objects.Delete(csc)
	klog.FromContext(ctx).V(2).Info("Deleted CSIStorageCapacity", "object", klog.KObj(csc), "storageClass", csc.StorageClassName,
		"node", csc.Annotations[AnnNode])
	return nil
}

// classChanged queues the items of an added or deleted class: to publish
// or to delete. Its binding mode is immutable.
func (p *Publisher) classChanged(obj any) {
	class, ok := untomb(obj).(*storagev1.StorageClass)
	if !ok || class.Provisioner != p.cfg.Provisioner {
		return
	}
	for _, it := range p.classItems(class) {
		p.queue.Add(it)
	}
	for _, it := range p.published() {
		if it.class == class.Name {
			p.queue.Add(it)
		}
	}
}

// volumeChanged queues the items of the node of one of the provisioner's
// volumes, every class's (classes may share paths): its room changed.
func (p *Publisher) volumeChanged(obj any) {
	pv, ok := untomb(obj).(*corev1.PersistentVolume)
	if !ok {
		return
	}
	node, ours := p.cfg.Source.IsVolume(pv)
	if !ours {
		return
	}
	for _, it := range append(p.wanted(), p.published()...) {
		if node == "" || it.node == node {
			p.queue.Add(it)
		}
	}
}

// volumeUpdated: only a new capacity (an expansion) changes the room.
func (p *Publisher) volumeUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.PersistentVolume)
	n, ok2 := newObj.(*corev1.PersistentVolume)
	if ok1 && ok2 {
		a, b := o.Spec.Capacity[corev1.ResourceStorage], n.Spec.Capacity[corev1.ResourceStorage]
		if a.Cmp(b) == 0 {
			return
		}
	}
	p.volumeChanged(newObj)
}

// objectChanged queues the item of one of the publisher's objects: one
// deleted by someone else is made again, one added that should not exist
// is deleted.
func (p *Publisher) objectChanged(obj any) {
	csc, ok := untomb(obj).(*storagev1.CSIStorageCapacity)
	if !ok {
		return
	}
	if it, ours := p.owns(csc); ours {
		p.queue.Add(it)
	}
}

// nodeChanged queues a node's items (its label of NodeLabelKey).
func (p *Publisher) nodeChanged(obj any) {
	node, ok := untomb(obj).(*corev1.Node)
	if !ok {
		return
	}
	for _, it := range append(p.wanted(), p.published()...) {
		if it.node == node.Name {
			p.queue.Add(it)
		}
	}
}

func (p *Publisher) nodeUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if ok1 && ok2 && o.Labels[p.cfg.NodeLabelKey] == n.Labels[p.cfg.NodeLabelKey] {
		return
	}
	p.nodeChanged(newObj)
}

func untomb(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}
