// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package resize is the external resizer of the volumes a provisioner made:
// kube-controller-manager's expand controller leaves hostPath and local PVs
// to "an external controller" (Normal event ExternalExpanding), and a
// Resizer is that controller.
//
// It follows the CSI external-resizer and Kubernetes' recovery from
// expansion failures (RecoverVolumeExpansionFailure, GA): a bound claim
// whose request exceeds its PV's capacity is marked
// (status.allocatedResources, allocatedResourceStatuses
// ControllerResizeInProgress, condition Resizing), the Expander grows the
// volume, then the PV's capacity is written first and the claim's status
// last. A volume too big for its place is marked ControllerResizeInfeasible
// and left alone until the user changes the request. A directory needs no
// node expansion, so no claim ever waits for the kubelet.
package resize

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/workloop"
)

// Expander does the volume's part of an expansion.
type Expander interface {
	// OwnsVolume says whether this instance resizes pv: a PV this provisioner made, of this instance's node (node-local DaemonSets) or any it serves.
	OwnsVolume(pv *corev1.PersistentVolume) bool
	// ExpandVolume makes pv's volume hold newBytes: checks the path's budget and raises an enforced size limit. An error wrapping ErrDoesNotFit is final until the claim's request changes; any other error is retried.
	ExpandVolume(ctx context.Context, pv *corev1.PersistentVolume, newBytes int64) error
}

// ErrDoesNotFit is what an Expander wraps when the volume cannot grow to the
// size asked for (its path's budget or its filesystem has no room): the claim
// is marked ControllerResizeInfeasible and not retried until its request
// changes.
var ErrDoesNotFit = errors.New("the volume does not fit at the requested size")

// Event reasons, as the CSI external-resizer names them, so that what users
// and tools know from CSI volumes holds here too.
const (
	// EventResizing (Normal): the resize of the claim's volume begins.
	EventResizing = "Resizing"
	// EventResizeFailed (Warning): the resize failed; the message says why.
	EventResizeFailed = "VolumeResizeFailed"
	// EventResizeSuccessful (Normal): the PV and the claim have the new size.
	EventResizeSuccessful = "VolumeResizeSuccessful"
)

// Defaults of the options.
const (
	DefaultRetryIntervalStart = controller.DefaultRetryIntervalStart
	DefaultRetryIntervalMax   = controller.DefaultRetryIntervalMax
	DefaultExpandTimeout      = controller.DefaultOperationTimeout
	// QueueName names the work queue (its metrics, its log lines).
	QueueName = "resize"
)

// Option configures a Resizer.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	provisioners         map[string]bool
	retryStart, retryMax time.Duration
	expandTimeout        time.Duration
}

// WithProvisionerNames limits the Resizer to PVs whose
// pv.kubernetes.io/provisioned-by annotation is one of names, so that two
// provisioners of the same kind (different --provisioner) never resize each
// other's volumes. Default: every PV the Expander owns.
func WithProvisionerNames(names ...string) Option {
	return optionFunc(func(c *config) error {
		for _, n := range names {
			if n == "" {
				return errors.New("WithProvisionerNames: empty name")
			}
			if c.provisioners == nil {
				c.provisioners = map[string]bool{}
			}
			c.provisioners[n] = true
		}
		return nil
	})
}

// WithRetryInterval sets the per-claim exponential backoff of failed
// resizes: the first retry after start, doubling up to max. Defaults
// DefaultRetryIntervalStart and DefaultRetryIntervalMax.
func WithRetryInterval(start, maxInterval time.Duration) Option {
	return optionFunc(func(c *config) error {
		if start <= 0 || maxInterval < start {
			return fmt.Errorf("WithRetryInterval: need 0 < start <= max, got start %v, max %v", start, maxInterval)
		}
		c.retryStart, c.retryMax = start, maxInterval
		return nil
	})
}

// WithExpandTimeout bounds each ExpandVolume call through its context; 0
// means no bound. Default DefaultExpandTimeout.
func WithExpandTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithExpandTimeout: must be 0 (none) or more, got %v", d)
		}
		c.expandTimeout = d
		return nil
	})
}

// Resizer expands the volumes of bound claims whose request grew. Make one
// with New and start it with Run.
type Resizer struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	synced   []cache.InformerSynced
	expander Expander
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	cfg      config
}

// New returns a Resizer that reads claims and PVs from factory's informers
// (whole objects: not those of controller.NewInformerFactory, which leaves
// bound claims out), expands through expander and records events on claims
// with recorder (see NewEventRecorder). Run starts the factory.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, expander Expander, recorder record.EventRecorder, opts ...Option) (*Resizer, error) {
	if client == nil || factory == nil || expander == nil || recorder == nil {
		return nil, errors.New("resize.New: client, informer factory, expander and event recorder are required")
	}
	cfg := config{retryStart: DefaultRetryIntervalStart, retryMax: DefaultRetryIntervalMax, expandTimeout: DefaultExpandTimeout}
	var errs []error
	for _, o := range opts {
		errs = append(errs, o.apply(&cfg))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	r := &Resizer{
		client: client, factory: factory, expander: expander, recorder: recorder, cfg: cfg,
		claims: claims.Lister(), volumes: volumes.Lister(),
		synced: []cache.InformerSynced{claims.Informer().HasSynced, volumes.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.retryStart, cfg.retryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueName}),
	}
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.claimChanged,
		UpdateFunc: func(_, obj any) { r.claimChanged(obj) },
		DeleteFunc: r.claimDeleted,
	}); err != nil {
		return nil, err
	}
	if _, err := volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.volumeChanged,
		UpdateFunc: func(_, obj any) { r.volumeChanged(obj) },
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// Run starts the informers, works with workers goroutines until ctx ends,
// then waits for them and returns. A Resizer runs once.
func (r *Resizer) Run(ctx context.Context, workers int) error {
	defer r.queue.ShutDown()
	if workers < 1 {
		return fmt.Errorf("resize: workers must be at least 1, got %d", workers)
	}
	logger := klog.FromContext(ctx).WithValues("controller", QueueName)
	ctx = klog.NewContext(ctx, logger)
	r.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), r.synced...) {
		return nil // stopped before anything started
	}
	logger.Info("Starting resizer", "workers", workers)
	if err := workloop.Run(ctx, r.queue, workloop.Config[string]{
		Workers:       workers,
		Sync:          r.sync,
		ErrorMessage:  "Resize failed, will retry",
		KeysAndValues: func(key string) []any { return []any{"claim", key} },
	}); err != nil {
		return err
	}
	logger.Info("Resizer stopped")
	return nil
}

// claimChanged queues a bound claim that asks for more than it has.
func (r *Resizer) claimChanged(obj any) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || !wantsMore(claim) {
		return
	}
	if key, err := cache.MetaNamespaceKeyFunc(claim); err == nil {
		r.queue.Add(key)
	}
}

// claimDeleted forgets a deleted claim's backoff.
func (r *Resizer) claimDeleted(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		r.queue.Forget(key)
	}
}

// volumeChanged queues the claim of a bound PV: its claim may have been
// waiting for the PV to reach the cache.
func (r *Resizer) volumeChanged(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil {
		return
	}
	claim, err := r.claims.PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(pv.Spec.ClaimRef.Name)
	if err != nil || claim.UID != pv.Spec.ClaimRef.UID {
		return
	}
	r.claimChanged(claim)
}

// wantsMore says whether claim is bound and requests more storage than its
// status records.
func wantsMore(claim *corev1.PersistentVolumeClaim) bool {
	if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
		return false
	}
	request, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return false
	}
	current := claim.Status.Capacity[corev1.ResourceStorage]
	return request.Cmp(current) > 0
}
