// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capacity publishes the free capacity a CSI driver reports as
// storage.k8s.io/v1 CSIStorageCapacity objects, which kube-scheduler reads
// to place pods whose WaitForFirstConsumer volumes do not exist yet
// (storage capacity tracking, KEP-1472).
//
// For every pair of a StorageClass of the driver (WaitForFirstConsumer, and
// Immediate ones if asked) and a topology segment where the driver runs, the
// controller asks the driver GetCapacity with the class's parameters and the
// segment, and keeps one object in its namespace with the answer. The
// segments are those of the nodes whose CSINode object lists the driver:
// the node's values of the topology keys the driver registered there. A
// driver without topology gets one object per class, valid on every node.
//
// The objects carry the labels DriverNameLabel and ManagedByLabel; the
// controller lists, updates and deletes only objects with both of its
// values, so that other producers' objects (other drivers, or per-node
// instances with another ManagedBy) are never touched.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
	"github.com/kubeprov/external-storage/lib/workloop"
)

// The labels of the objects the controller manages, as the upstream
// external-provisioner sets them.
const (
	// DriverNameLabel holds the driver's name.
	DriverNameLabel = "csi.storage.k8s.io/drivername"
	// ManagedByLabel tells apart the producers of one driver's objects.
	ManagedByLabel = "csi.storage.k8s.io/managed-by"
	// DefaultManagedBy is ManagedByLabel's value for a central provisioner,
	// the same as upstream's, so that switching keeps the objects.
	DefaultManagedBy = "external-provisioner"
)

// NodeManagedBy is ManagedByLabel's value for the instance of a node, as
// upstream's external-provisioner makes it with --node-deployment, so that
// switching keeps the objects: "external-provisioner-<node>", or, when that
// is longer than a label value may be, a shortened form with a hash of the
// base.
func NodeManagedBy(node string) string {
	const maxLength = content.LabelValueMaxLength
	base := DefaultManagedBy
	name := base + "-" + node
	if len(name) <= maxLength {
		return name
	}
	// Room left for the base beside "-<8 hex digits>-" and the node.
	if baseLength := maxLength - 10 - len(node); baseLength > 0 {
		return base[:baseLength] + "-" + fnv32a(base) + "-" + node
	}
	// The node name alone is too long: the base and a hash of everything.
	short := base[:min(len(base), maxLength-9)] + "-" + fnv32a(name)
	return short[:min(maxLength, len(short))]
}

// fnv32a is the FNV-1a hash of s in 8 hexadecimal digits.
func fnv32a(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// Defaults of Config.
const (
	DefaultPollInterval = time.Minute
	DefaultWorkers      = 1
	DefaultTimeout      = 10 * time.Second
)

// generateName prefixes the names of created objects.
const generateName = "csisc-"

// Client is the part of a CSI controller client the controller calls.
type Client interface {
	GetCapacity(ctx context.Context, in *csi.GetCapacityRequest, opts ...grpc.CallOption) (*csi.GetCapacityResponse, error)
}

// Config configures a Controller. DriverName, Driver, Client, Informers and
// Namespace are required.
type Config struct {
	// DriverName is the driver's name: the provisioner of its classes.
	DriverName string
	// Driver answers GetCapacity.
	Driver Client
	// Client writes the CSIStorageCapacity objects and watches them; give it
	// a rate limit of its own (--kube-api-capacity-qps/-burst).
	Client kubernetes.Interface
	// Informers provides the StorageClass cache and, with Topology, the Node
	// and CSINode caches. New registers them; the caller starts the factory.
	Informers informers.SharedInformerFactory
	// Namespace holds the objects.
	Namespace string
	// Owner, if not nil, is the owner of every object created, so that the
	// garbage collector removes them with the provisioner's deployment.
	Owner *metav1.OwnerReference
	// ManagedBy is ManagedByLabel's value; default DefaultManagedBy, or
	// NodeManagedBy(NodeName) for a node's instance.
	ManagedBy string
	// NodeName, if set, makes this a node's instance (--node-deployment):
	// it publishes only that node's segment, beside the instances of the
	// other nodes, each under a ManagedBy of its own.
	NodeName string
	// Topology: the driver reports VOLUME_ACCESSIBILITY_CONSTRAINTS, so
	// capacity is asked per segment.
	Topology bool
	// ForImmediateBinding also publishes capacity for Immediate classes.
	ForImmediateBinding bool
	// PollInterval is how often every object is refreshed; default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Workers update objects in parallel; default DefaultWorkers.
	Workers int
	// Timeout bounds each GetCapacity call; default DefaultTimeout.
	Timeout time.Duration
	// Registerer, if not nil, receives the controller's metrics.
	Registerer prometheus.Registerer
}

// item is one object's identity: a class and a segment (segmentKey).
type item struct {
	class, segment string
}

func (i item) String() string { return i.class + "@{" + i.segment + "}" }

// Controller keeps the CSIStorageCapacity objects of one driver.
type Controller struct {
	cfg      Config
	classes  storagelisters.StorageClassLister
	nodes    corelisters.NodeLister
	csiNodes storagelisters.CSINodeLister
	synced   []cache.InformerSynced
	informer []cache.SharedIndexInformer // those the handlers are added to in Run
	metrics  metrics

	// Set in Run, before any handler is registered; capacities is read
	// under mu by the metrics, which may be gathered before Run.
	queue      workqueue.TypedRateLimitingInterface[item]
	capacities cache.Indexer

	mu       sync.Mutex
	segments map[string]map[string]string // by segmentKey
}

// New checks cfg and registers the informers the controller needs.
func New(cfg Config) (*Controller, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	c := &Controller{cfg: cfg}
	m, err := newMetrics(cfg.Registerer, c)
	if err != nil {
		return nil, err
	}
	c.metrics = m
	c.registerInformers()
	return c, nil
}

// check reports every required field missing and every negative one.
func (cfg *Config) check() error {
	var errs []error
	if cfg.DriverName == "" {
		errs = append(errs, errors.New("capacity: DriverName is required"))
	}
	if cfg.Driver == nil || cfg.Client == nil || cfg.Informers == nil {
		errs = append(errs, errors.New("capacity: Driver, Client and Informers are required"))
	}
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("capacity: Namespace is required"))
	}
	if cfg.PollInterval < 0 || cfg.Workers < 0 || cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("capacity: PollInterval, Workers and Timeout must not be negative, got %v, %d, %v", cfg.PollInterval, cfg.Workers, cfg.Timeout))
	}
	return errors.Join(errs...)
}

// setDefaults fills in the fields left zero.
func (cfg *Config) setDefaults() {
	if cfg.ManagedBy == "" {
		cfg.ManagedBy = DefaultManagedBy
		if cfg.NodeName != "" {
			cfg.ManagedBy = NodeManagedBy(cfg.NodeName)
		}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
}

// registerInformers takes the listers the controller reads from the
// factory: StorageClasses, and Nodes and CSINodes with topology.
func (c *Controller) registerInformers() {
	classes := c.cfg.Informers.Storage().V1().StorageClasses()
	c.classes = classes.Lister()
	c.informer = append(c.informer, classes.Informer())
	if c.cfg.Topology {
		nodes, csiNodes := c.cfg.Informers.Core().V1().Nodes(), c.cfg.Informers.Storage().V1().CSINodes()
		c.nodes, c.csiNodes = nodes.Lister(), csiNodes.Lister()
		c.informer = append(c.informer, nodes.Informer(), csiNodes.Informer())
	}
	for _, inf := range c.informer {
		c.synced = append(c.synced, inf.HasSynced)
	}
}

// Selector selects the objects the controller manages.
func (c *Controller) Selector() labels.Selector {
	return labels.SelectorFromSet(c.labels())
}

func (c *Controller) labels() labels.Set {
	return labels.Set{DriverNameLabel: c.cfg.DriverName, ManagedByLabel: c.cfg.ManagedBy}
}

// itemIndex indexes the objects by the item they are for.
const itemIndex = "item"

// Run keeps the objects up to date until ctx ends. It is meant to run once,
// on the active replica only: two replicas would each create objects.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("capacity")
	ctx = klog.NewContext(ctx, logger)
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[item](),
		workqueue.TypedRateLimitingQueueConfig[item]{Name: "csistoragecapacity"})
	defer c.queue.ShutDown()

	selector := c.Selector().String()
	factory := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	capInformer, err := c.watchCapacities(factory)
	if err != nil {
		return err
	}
	removeHandlers, err := c.addHandlers(ctx, capInformer)
	defer removeHandlers()
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), append(slices.Clone(c.synced), capInformer.HasSynced)...) {
		return nil // stopped while starting
	}
	c.refreshSegments()
	c.enqueueAll()
	logger.Info("Publishing storage capacity", "namespace", c.cfg.Namespace, "selector", selector,
		"pollInterval", c.cfg.PollInterval, "workers", c.cfg.Workers, "topology", c.cfg.Topology)
	return workloop.Run(ctx, c.queue, workloop.Config[item]{
		Workers:       c.cfg.Workers,
		Sync:          c.sync,
		ErrorMessage:  "Could not update CSIStorageCapacity, will retry",
		KeysAndValues: func(it item) []any { return []any{"class", it.class, "segment", it.segment} },
		ResyncPeriod:  c.cfg.PollInterval,
		Resync:        c.enqueueAll,
	})
}

// watchCapacities makes the informer of the controller's objects, indexed
// by item, and keeps its cache in c.capacities.
func (c *Controller) watchCapacities(factory informers.SharedInformerFactory) (cache.SharedIndexInformer, error) {
	capInformer := factory.Storage().V1().CSIStorageCapacities().Informer()
	ours := c.Selector()
	if err := capInformer.AddIndexers(cache.Indexers{itemIndex: func(obj any) ([]string, error) {
		// The watch selects by label already; checked again because the
		// controller must never touch another producer's objects.
		if csc, ok := obj.(*storagev1.CSIStorageCapacity); ok && ours.Matches(labels.Set(csc.Labels)) {
			return []string{itemOf(csc).String()}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.capacities = capInformer.GetIndexer()
	c.mu.Unlock()
	return capInformer, nil
}

// addHandlers registers the event handlers on the informers. The returned
// function removes those registered, even after an error.
func (c *Controller) addHandlers(ctx context.Context, capInformer cache.SharedIndexInformer) (func(), error) {
	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		c.informer[0]: cache.ResourceEventHandlerFuncs{AddFunc: c.classChanged, DeleteFunc: c.classChanged},
		capInformer:   cache.ResourceEventHandlerFuncs{AddFunc: c.capacityAdded, DeleteFunc: c.capacityDeleted},
	}
	if c.cfg.Topology {
		topology := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.topologyChanged(ctx) },
			UpdateFunc: c.topologyUpdated(ctx),
			DeleteFunc: func(any) { c.topologyChanged(ctx) },
		}
		handlers[c.informer[1]], handlers[c.informer[2]] = topology, topology
	}
	var removers []func()
	remove := func() {
		// Last registered, first removed.
		for _, r := range slices.Backward(removers) {
			r()
		}
	}
	for inf, h := range handlers {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return remove, err
		}
		removers = append(removers, func() { _ = inf.RemoveEventHandler(reg) })
	}
	return remove, nil
}

// enqueueAll queues every wanted item and every existing object's item:
// the first are refreshed, the others deleted if no longer wanted.
func (c *Controller) enqueueAll() {
	for _, it := range c.wanted() {
		c.queue.Add(it)
	}
	for _, csc := range c.managed() {
		c.queue.Add(itemOf(csc))
	}
}

// managed lists the cached objects the controller manages.
func (c *Controller) managed() []*storagev1.CSIStorageCapacity {
	var out []*storagev1.CSIStorageCapacity
	ours := c.Selector()
	for _, obj := range c.capacities.List() {
		if csc, ok := obj.(*storagev1.CSIStorageCapacity); ok && ours.Matches(labels.Set(csc.Labels)) {
			out = append(out, csc)
		}
	}
	return out
}

// wanted lists the items that should have an object.
func (c *Controller) wanted() []item {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []item
	for _, class := range classes {
		if !c.classWanted(class) {
			continue
		}
		for key := range c.segments {
			out = append(out, item{class: class.Name, segment: key})
		}
	}
	return out
}

// classWanted reports whether the class gets objects.
func (c *Controller) classWanted(class *storagev1.StorageClass) bool {
	if class.Provisioner != c.cfg.DriverName || class.DeletionTimestamp != nil {
		return false
	}
	wffc := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	return wffc || c.cfg.ForImmediateBinding
}

// desired returns the class and the segment of an item that should have an
// object, or ok false.
func (c *Controller) desired(it item) (class *storagev1.StorageClass, segment map[string]string, ok bool) {
	class, err := c.classes.Get(it.class)
	if err != nil || !c.classWanted(class) {
		return nil, nil, false
	}
	c.mu.Lock()
	segment, ok = c.segments[it.segment]
	c.mu.Unlock()
	return class, segment, ok
}

func (c *Controller) classChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	class, ok := obj.(*storagev1.StorageClass)
	if !ok || class.Provisioner != c.cfg.DriverName {
		return
	}
	// Parameters and binding mode are immutable: only additions and
	// deletions change what is published.
	c.mu.Lock()
	for key := range c.segments {
		c.queue.Add(item{class: class.Name, segment: key})
	}
	c.mu.Unlock()
	for _, csc := range c.managed() {
		if csc.StorageClassName == class.Name {
			c.queue.Add(itemOf(csc))
		}
	}
}

// capacityAdded queues objects that should not exist (another replica's
// duplicate, an object of a gone class or segment) for deletion.
func (c *Controller) capacityAdded(obj any) {
	csc, ok := obj.(*storagev1.CSIStorageCapacity)
	if !ok || !c.Selector().Matches(labels.Set(csc.Labels)) {
		return
	}
	it := itemOf(csc)
	if _, _, wanted := c.desired(it); !wanted {
		c.queue.Add(it)
		return
	}
	if others, _ := c.capacities.ByIndex(itemIndex, it.String()); len(others) > 1 {
		c.queue.Add(it)
	}
}

// capacityDeleted queues a wanted object deleted by someone else, to be
// created again.
func (c *Controller) capacityDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	csc, ok := obj.(*storagev1.CSIStorageCapacity)
	if !ok || !c.Selector().Matches(labels.Set(csc.Labels)) {
		return
	}
	if it := itemOf(csc); c.isWanted(it) {
		c.queue.Add(it)
	}
}

func (c *Controller) isWanted(it item) bool {
	_, _, ok := c.desired(it)
	return ok
}

// topologyUpdated reacts to node and CSINode updates that can change
// segments: labels, or the drivers registered.
func (c *Controller) topologyUpdated(ctx context.Context) func(oldObj, newObj any) {
	return func(oldObj, newObj any) {
		switch o := oldObj.(type) {
		case *corev1.Node:
			if n, ok := newObj.(*corev1.Node); ok && maps.Equal(o.Labels, n.Labels) {
				return
			}
		case *storagev1.CSINode:
			if n, ok := newObj.(*storagev1.CSINode); ok && o.ResourceVersion == n.ResourceVersion {
				return
			}
		}
		c.topologyChanged(ctx)
	}
}

// topologyChanged recomputes the segments and queues the items of those
// that appeared or disappeared.
func (c *Controller) topologyChanged(ctx context.Context) {
	added, removed := c.refreshSegments()
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	klog.FromContext(ctx).V(2).Info("Topology segments changed", "added", added, "removed", removed)
	if len(added) > 0 {
		classes, _ := c.classes.List(labels.Everything())
		for _, class := range classes {
			if c.classWanted(class) {
				for _, key := range added {
					c.queue.Add(item{class: class.Name, segment: key})
				}
			}
		}
	}
	for _, csc := range c.managed() {
		if slices.Contains(removed, itemOf(csc).segment) {
			c.queue.Add(itemOf(csc))
		}
	}
}

// refreshSegments recomputes the segments and returns the keys of those
// added and removed.
func (c *Controller) refreshSegments() (added, removed []string) {
	segments := map[string]map[string]string{"": {}}
	if c.cfg.Topology {
		segments = c.clusterSegments()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range segments {
		if _, ok := c.segments[key]; !ok {
			added = append(added, key)
		}
	}
	for key := range c.segments {
		if _, ok := segments[key]; !ok {
			removed = append(removed, key)
		}
	}
	c.segments = segments
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// clusterSegments returns, by segmentKey, the segment of each node whose
// CSINode lists the driver with topology keys: the node's values of them.
// Nodes without one of the keys as a label have no segment. A node's
// instance (NodeName) looks at its own node only.
func (c *Controller) clusterSegments() map[string]map[string]string {
	out := map[string]map[string]string{}
	csiNodes, err := c.csiNodes.List(labels.Everything())
	if err != nil {
		return out
	}
	for _, csiNode := range csiNodes {
		if c.cfg.NodeName != "" && csiNode.Name != c.cfg.NodeName {
			continue
		}
		if segment := c.nodeSegment(csiNode); segment != nil {
			out[segmentKey(segment)] = segment
		}
	}
	return out
}

// nodeSegment is the segment of csiNode's node, nil if it has none.
func (c *Controller) nodeSegment(csiNode *storagev1.CSINode) map[string]string {
	keys := c.topologyKeys(csiNode)
	if len(keys) == 0 {
		return nil
	}
	node, err := c.nodes.Get(csiNode.Name)
	if err != nil {
		return nil
	}
	segment := make(map[string]string, len(keys))
	for _, k := range keys {
		v, ok := node.Labels[k]
		if !ok {
			return nil
		}
		segment[k] = v
	}
	return segment
}

// topologyKeys are the topology keys the driver registered in csiNode,
// none if it is not registered there.
func (c *Controller) topologyKeys(csiNode *storagev1.CSINode) []string {
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == c.cfg.DriverName {
			return d.TopologyKeys
		}
	}
	return nil
}

// segmentKey is a segment as sorted key=value pairs joined by commas
// (neither can appear in label keys or values); "" for no topology.
func segmentKey(segment map[string]string) string {
	parts := make([]string, 0, len(segment))
	for _, k := range slices.Sorted(maps.Keys(segment)) {
		parts = append(parts, k+"="+segment[k])
	}
	return strings.Join(parts, ",")
}

// notOurTopology is the segment of objects whose nodeTopology is not a plain
// label match (or is missing): no wanted item has it.
const notOurTopology = "\x00"

// itemOf returns the item an object is for.
func itemOf(csc *storagev1.CSIStorageCapacity) item {
	it := item{class: csc.StorageClassName, segment: notOurTopology}
	if t := csc.NodeTopology; t != nil && len(t.MatchExpressions) == 0 {
		it.segment = segmentKey(t.MatchLabels)
	}
	return it
}

// sync brings an item's object up to date: deleted when the item is not
// wanted; else created or updated with what the driver reports, keeping one
// object per item.
func (c *Controller) sync(ctx context.Context, it item) error {
	existing, err := c.existing(it)
	if err != nil {
		return err
	}
	class, segment, wanted := c.desired(it)
	if !wanted {
		return c.deleteAll(ctx, existing, "its StorageClass or topology segment is gone")
	}
	// Duplicates (a crash between create and cache update): keep the first.
	if len(existing) > 1 {
		if err := c.deleteAll(ctx, existing[1:], "duplicate"); err != nil {
			return err
		}
		existing = existing[:1]
	}

	available, maxSize, err := c.getCapacity(ctx, class, segment)
	if err != nil {
		// Keep what was published; the next poll asks again. A retry
		// sooner would only load a driver that is failing.
		c.metrics.failures.WithLabelValues(class.Name).Inc()
		klog.FromContext(ctx).Error(err, "GetCapacity failed, keeping the published capacity until the next poll",
			"storageClass", class.Name, "segment", it.segment, "pollInterval", c.cfg.PollInterval)
		return nil
	}

	if len(existing) == 0 {
		return c.create(ctx, it, class, segment, available, maxSize)
	}
	return c.update(ctx, existing[0], available, maxSize)
}

// existing are the cached objects of an item, by name.
func (c *Controller) existing(it item) ([]*storagev1.CSIStorageCapacity, error) {
	var existing []*storagev1.CSIStorageCapacity
	objs, err := c.capacities.ByIndex(itemIndex, it.String())
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if csc, ok := obj.(*storagev1.CSIStorageCapacity); ok {
			existing = append(existing, csc)
		}
	}
	slices.SortFunc(existing, func(a, b *storagev1.CSIStorageCapacity) int { return strings.Compare(a.Name, b.Name) })
	return existing, nil
}

// create publishes the first object of an item.
func (c *Controller) create(ctx context.Context, it item, class *storagev1.StorageClass, segment map[string]string, available, maxSize *resource.Quantity) error {
	csc := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: generateName,
			Namespace:    c.cfg.Namespace,
			Labels:       c.labels(),
		},
		StorageClassName:  class.Name,
		NodeTopology:      &metav1.LabelSelector{MatchLabels: maps.Clone(segment)},
		Capacity:          available,
		MaximumVolumeSize: maxSize,
	}
	if c.cfg.Owner != nil {
		csc.OwnerReferences = []metav1.OwnerReference{*c.cfg.Owner}
	}
	created, err := c.cfg.Client.StorageV1().CSIStorageCapacities(c.cfg.Namespace).Create(ctx, csc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating CSIStorageCapacity for StorageClass %s, segment {%s}: %w", class.Name, it.segment, err)
	}
	// Known at once, so that the next sync updates it instead of
	// creating another before the watch delivers it.
	_ = c.capacities.Add(created)
	klog.FromContext(ctx).V(2).Info("Created CSIStorageCapacity", "object", klog.KObj(created), "storageClass", class.Name,
		"segment", it.segment, "capacity", available, "maximumVolumeSize", maxSize)
	return nil
}

// update writes the driver's answer into an item's object, if it changed.
func (c *Controller) update(ctx context.Context, old *storagev1.CSIStorageCapacity, available, maxSize *resource.Quantity) error {
	if sameQuantity(old.Capacity, available) && sameQuantity(old.MaximumVolumeSize, maxSize) {
		return nil
	}
	csc := old.DeepCopy()
	csc.Capacity, csc.MaximumVolumeSize = available, maxSize
	updated, err := c.cfg.Client.StorageV1().CSIStorageCapacities(c.cfg.Namespace).Update(ctx, csc, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating CSIStorageCapacity %s: %w", klog.KObj(csc), err)
	}
	_ = c.capacities.Update(updated)
	klog.FromContext(ctx).V(4).Info("Updated CSIStorageCapacity", "object", klog.KObj(updated), "capacity", available, "maximumVolumeSize", maxSize)
	return nil
}

func (c *Controller) deleteAll(ctx context.Context, caps []*storagev1.CSIStorageCapacity, why string) error {
	var errs []error
	for _, csc := range caps {
		err := c.cfg.Client.StorageV1().CSIStorageCapacities(csc.Namespace).Delete(ctx, csc.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &csc.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting CSIStorageCapacity %s: %w", klog.KObj(csc), err))
			continue
		}
		_ = c.capacities.Delete(csc)
		klog.FromContext(ctx).V(2).Info("Deleted CSIStorageCapacity", "object", klog.KObj(csc), "storageClass", csc.StorageClassName, "reason", why)
	}
	return errors.Join(errs...)
}

// getCapacity asks the driver for the capacity of a class in a segment:
// the class's parameters without the provisioner's reserved keys.
func (c *Controller) getCapacity(ctx context.Context, class *storagev1.StorageClass, segment map[string]string) (available, maxSize *resource.Quantity, err error) {
	req := &csi.GetCapacityRequest{Parameters: map[string]string{}}
	for k, v := range class.Parameters {
		if !strings.HasPrefix(k, provisioner.ReservedPrefix) {
			req.Parameters[k] = v
		}
	}
	if len(segment) > 0 {
		req.AccessibleTopology = &csi.Topology{Segments: maps.Clone(segment)}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	rsp, err := c.cfg.Driver.GetCapacity(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("GetCapacity for StorageClass %s: %w", class.Name, err)
	}
	available = resource.NewQuantity(rsp.GetAvailableCapacity(), resource.BinarySI)
	if m := rsp.GetMaximumVolumeSize(); m != nil {
		maxSize = resource.NewQuantity(m.GetValue(), resource.BinarySI)
	}
	return available, maxSize, nil
}

func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}

type metrics struct {
	failures *prometheus.CounterVec
}

// The object counts, under upstream's names (no labels), so that its
// dashboards and alerts keep working.
var (
	objectsGoalDesc = prometheus.NewDesc("csistoragecapacities_desired_goal",
		"CSIStorageCapacity objects that should exist: one per StorageClass and topology segment.", nil, nil)
	objectsCurrentDesc = prometheus.NewDesc("csistoragecapacities_desired_current",
		"CSIStorageCapacity objects that should exist and do.", nil, nil)
	objectsObsoleteDesc = prometheus.NewDesc("csistoragecapacities_obsolete",
		"CSIStorageCapacity objects managed here that should not exist (their class or segment is gone, or a duplicate) and will be deleted.", nil, nil)
)

// objectCounts collects the object counts of a Controller when gathered.
type objectCounts struct{ c *Controller }

func (o objectCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- objectsGoalDesc
	ch <- objectsCurrentDesc
	ch <- objectsObsoleteDesc
}

func (o objectCounts) Collect(ch chan<- prometheus.Metric) {
	goal, current, obsolete := o.c.objectCounts()
	ch <- prometheus.MustNewConstMetric(objectsGoalDesc, prometheus.GaugeValue, float64(goal))
	ch <- prometheus.MustNewConstMetric(objectsCurrentDesc, prometheus.GaugeValue, float64(current))
	ch <- prometheus.MustNewConstMetric(objectsObsoleteDesc, prometheus.GaugeValue, float64(obsolete))
}

// objectCounts returns how many objects should exist, how many of those do,
// and how many managed objects exist that should not (one per extra
// duplicate too). All are 0 until Run has started (a standby replica).
func (c *Controller) objectCounts() (goal, current, obsolete int) {
	c.mu.Lock()
	capacities := c.capacities
	c.mu.Unlock()
	if capacities == nil {
		return 0, 0, 0
	}
	wanted := map[string]bool{}
	for _, it := range c.wanted() {
		wanted[it.String()] = true
	}
	have := map[string]int{}
	for _, csc := range c.managed() {
		have[itemOf(csc).String()]++
	}
	for key, n := range have {
		if wanted[key] {
			current++
			obsolete += n - 1
		} else {
			obsolete += n
		}
	}
	return len(wanted), current, obsolete
}

func newMetrics(r prometheus.Registerer, c *Controller) (metrics, error) {
	m := metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "csistoragecapacity_getcapacity_failures_total",
			Help: "GetCapacity calls that failed, by StorageClass; the published capacity is kept until the next poll.",
		}, []string{"storage_class"}),
	}
	if r != nil {
		for _, collector := range []prometheus.Collector{m.failures, objectCounts{c}} {
			if err := r.Register(collector); err != nil {
				return metrics{}, fmt.Errorf("capacity metrics: %w", err)
			}
		}
	}
	return m, nil
}
