// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cloneprotection removes the cloning-protection finalizer that the
// provisioner puts on a clone's source claim, once no clone of that claim is
// pending any more (each one bound, or deleted). Only a clone that may use
// its source holds it: a claim of another namespace that names the source
// without a ReferenceGrant could otherwise keep it Terminating forever.
package cloneprotection

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
)

// Controller watches clone claims and lets go of their sources.
type Controller struct {
	client  kubernetes.Interface
	claims  corelisters.PersistentVolumeClaimLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	threads int
	// access is the provisioner's rule for sources in other namespaces.
	access provisioner.CrossNamespaceAccess
}

// New returns a Controller on the claims informer (the caller starts it)
// with threads workers; access must be the provisioner's.
func New(client kubernetes.Interface, claims coreinformers.PersistentVolumeClaimInformer, access provisioner.CrossNamespaceAccess, threads int) (*Controller, error) {
	if threads < 1 {
		return nil, fmt.Errorf("cloning protection: threads must be at least 1, got %d", threads)
	}
	c := &Controller{
		client:  client,
		claims:  claims.Lister(),
		synced:  claims.Informer().HasSynced,
		threads: threads,
		access:  access,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "cloning-protection"}),
	}
	_, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueSource,
		// Both forms: with controller.NewInformerFactory a clone's binding
		// arrives as its deletion (whole), with other factories as an
		// update.
		UpdateFunc: func(old, updated any) { c.enqueueSource(old); c.enqueueSource(updated) },
		DeleteFunc: c.enqueueSource,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueueSource(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if source, ok := provisioner.CloneSource(claim); ok {
		c.queue.Add(source)
	}
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("cloning protection: waiting for the claim cache: %w", ctx.Err())
	}
	for range c.threads {
		go wait.UntilWithContext(ctx, c.runWorker, 0)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Will retry letting go of a clone source", "claim", key.String(), "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync removes the finalizer from the source claim unless a clone that may
// use it is still pending.
func (c *Controller) sync(ctx context.Context, source cache.ObjectName) error {
	pending, err := c.clonePending(ctx, source)
	if err != nil || pending {
		return err
	}
	// Bound claims are not in the controller's cache: the source's
	// finalizers come from the API server.
	src, err := c.client.CoreV1().PersistentVolumeClaims(source.Namespace).Get(ctx, source.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.Contains(src.Finalizers, provisioner.CloningProtectionFinalizer) {
		return nil
	}
	updated := src.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == provisioner.CloningProtectionFinalizer })
	if _, err := c.client.CoreV1().PersistentVolumeClaims(source.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s from claim %s: %w", provisioner.CloningProtectionFinalizer, source.String(), err)
	}
	klog.FromContext(ctx).V(2).Info("No clone pending: source claim let go", "claim", source.String())
	return nil
}

// clonePending reports whether a pending clone of source may use it. A
// claim the source is not shared with can never be cloned from it, so it
// does not count; when sharing cannot be told yet, the error keeps the
// finalizer until it can.
func (c *Controller) clonePending(ctx context.Context, source cache.ObjectName) (bool, error) {
	// All namespaces: with CrossNamespaceVolumeDataSource a clone may be in
	// another namespace than its source.
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, claim := range claims {
		if s, ok := provisioner.CloneSource(claim); !ok || s != source || claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
			continue
		}
		err := c.access.Check(ctx, claim)
		var notShared *provisioner.NotSharedError
		switch {
		case err == nil:
			return true, nil
		case errors.As(err, &notShared):
			klog.FromContext(ctx).V(4).Info("Claim names a source not shared with it: it does not hold the source", "claim", klog.KObj(claim), "source", source.String())
		default:
			return false, fmt.Errorf("whether clone %s may use claim %s: %w", klog.KObj(claim), source.String(), err)
		}
	}
	return false, nil
}
