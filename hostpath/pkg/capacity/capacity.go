// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capacity publishes the room hostpath-provisioner has left on each
// node as storage.k8s.io/v1 CSIStorageCapacity objects, so that
// kube-scheduler places a pod whose WaitForFirstConsumer claim would not
// fit a node elsewhere at the first try, instead of the provisioner sending
// the claim back (ProvisioningReschedule) after the scheduler chose it.
//
// kube-scheduler reads these objects only for classes whose provisioner
// names a CSIDriver object with storageCapacity: true (see the README's
// "Scheduling by capacity"); this package writes the objects, the
// installation makes the CSIDriver.
//
// One object is kept per pair of a WaitForFirstConsumer StorageClass of the
// provisioner and a node the instance serves (Source.ServedNodes), in one
// namespace, named from a hash of provisioner, class and node. Its
// nodeTopology selects the node by its --node-label-key label; capacity is
// the room left on all the node's paths for the class, maximumVolumeSize
// the most any one path has (the scheduler compares a claim with the
// latter). A Publisher updates, creates and deletes only objects that
// carry its labels and whose name is the one it derives for them: never
// another producer's.
package capacity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/workloop"
)

// DefaultPollInterval is how often every object is refreshed, as the CSI
// external-provisioner's --capacity-poll-interval.
const DefaultPollInterval = time.Minute

// The labels and the annotation of the objects a Publisher keeps.
const (
	// LabelManagedBy says which program made the object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is LabelManagedBy's value.
	ManagedBy = "hostpath-provisioner"
	// LabelProvisioner, LabelClass and LabelNode name the provisioner,
	// StorageClass and node the object is for (labelValue: the name when
	// it is a valid label value, else a hash of it).
	LabelProvisioner = "hostpath.kubeprov.io/provisioner"
	LabelClass       = "hostpath.kubeprov.io/storage-class"
	LabelNode        = "hostpath.kubeprov.io/node"
	// AnnNode holds the node's name in full.
	AnnNode = "hostpath.kubeprov.io/node"
	// NamePrefix begins every object's name.
	NamePrefix = "hostpath-"
)

// Source is what the publisher asks the provisioner (hostpath.Provisioner).
type Source interface {
	// NodeRoom is the room a node's paths have left for a class: the most
	// on one path and the sum; known is false when a path's budget is
	// unknown.
	NodeRoom(class, node string) (largest, total int64, known bool, err error)
	// ServedNodes are the nodes whose volumes of class this instance makes.
	ServedNodes(class string) ([]string, error)
	// SharedClass says whether the class's volumes are on a path every node
	// mounts: their room is then valid on every node.
	SharedClass(class string) bool
	// IsVolume says whether a PV is one of this provisioner's, and on which
	// node (empty for a shared volume): its room counts there.
	IsVolume(pv *corev1.PersistentVolume) (node string, ok bool)
}

// Config configures a Publisher. Provisioner, Namespace, Client, Informers
// and Source are required.
type Config struct {
	// Provisioner is the provisioner's name, the classes' provisioner.
	Provisioner string
	// Namespace holds the objects.
	Namespace string
	// Client writes the objects and watches those of this publisher.
	Client kubernetes.Interface
	// Informers is the controller's shared factory: New takes the
	// StorageClass and PersistentVolume caches from it (and the Node cache
	// with a NodeLabelKey other than the hostname), before it starts.
	Informers informers.SharedInformerFactory
	// Source tells the room and the nodes served.
	Source Source
	// Node, if set, is the only node this publisher publishes for and
	// whose objects it looks at (a --node-local instance).
	Node string
	// NodeLabelKey is the node label the objects' nodeTopology selects;
	// empty means kubernetes.io/hostname, whose value is the node's name.
	// With another key the value is read from the Node.
	NodeLabelKey string
	// PollInterval is how often every object is refreshed; zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Registerer, if not nil, receives the publisher's metrics.
	Registerer prometheus.Registerer
}

// item is one object's identity.
type item struct{ class, node string }

// Publisher keeps the CSIStorageCapacity objects of one provisioner (or of
// one node's instance).
type Publisher struct {
	cfg     Config
	classes storagelisters.StorageClassLister
	nodes   corelisters.NodeLister // nil with the hostname label
	shared  []cache.SharedIndexInformer
	writes  *prometheus.CounterVec

	// Set in Run, before any handler is registered.
	queue   workqueue.TypedRateLimitingInterface[item]
	objects cache.Indexer

	mu      sync.Mutex
	skipped map[item]string // items not published, and why, logged once
}

// New checks cfg and takes the caches it needs from cfg.Informers.
func New(cfg Config) (*Publisher, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.NodeLabelKey == "" {
		cfg.NodeLabelKey = corev1.LabelHostname
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	p := &Publisher{cfg: cfg, skipped: map[item]string{}}
	classes := cfg.Informers.Storage().V1().StorageClasses()
	p.classes = classes.Lister()
	p.shared = []cache.SharedIndexInformer{classes.Informer(), cfg.Informers.Core().V1().PersistentVolumes().Informer()}
	if cfg.NodeLabelKey != corev1.LabelHostname {
		nodes := cfg.Informers.Core().V1().Nodes()
		p.nodes = nodes.Lister()
		p.shared = append(p.shared, nodes.Informer())
	}
	p.writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostpath_csistoragecapacity_writes_total",
		Help: "API writes of CSIStorageCapacity objects, by verb (create, update, delete); an object is written only when what it says changed.",
	}, []string{"verb"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(p.writes); err != nil {
			return nil, fmt.Errorf("capacity metrics: %w", err)
		}
	}
	return p, nil
}

// check reports every required field missing.
func (cfg *Config) check() error {
	var errs []error
	if cfg.Provisioner == "" || cfg.Namespace == "" {
		errs = append(errs, errors.New("capacity: Provisioner and Namespace are required"))
	}
	if cfg.Client == nil || cfg.Informers == nil || cfg.Source == nil {
		errs = append(errs, errors.New("capacity: Client, Informers and Source are required"))
	}
	if cfg.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("capacity: PollInterval must not be negative, got %v", cfg.PollInterval))
	}
	return errors.Join(errs...)
}

// Selector selects the objects this publisher looks at: its provisioner's,
// and with Node only that node's.
func (p *Publisher) Selector() labels.Selector {
	set := labels.Set{LabelManagedBy: ManagedBy, LabelProvisioner: labelValue(p.cfg.Provisioner)}
	if p.cfg.Node != "" {
		set[LabelNode] = labelValue(p.cfg.Node)
	}
	return labels.SelectorFromSet(set)
}

// Name is the name of the object of class on node: NamePrefix and a hash
// of the provisioner, the class and the node.
func (p *Publisher) Name(class, node string) string {
	return NamePrefix + hash(p.cfg.Provisioner + "\x00" + class + "\x00" + node)[:16]
}

// objectLabels are the labels of the object of it.
func (p *Publisher) objectLabels(it item) map[string]string {
	return map[string]string{
		LabelManagedBy:   ManagedBy,
		LabelProvisioner: labelValue(p.cfg.Provisioner),
		LabelClass:       labelValue(it.class),
		LabelNode:        labelValue(it.node),
	}
}

// owns says whether csc is this publisher's: it carries exactly the labels
// and the name the publisher gives the item it claims to be for. Labels
// alone are a claim anyone can make.
func (p *Publisher) owns(csc *storagev1.CSIStorageCapacity) (item, bool) {
	it := itemOf(csc)
	if csc.Namespace != p.cfg.Namespace || csc.Name != p.Name(it.class, it.node) {
		return it, false
	}
	if p.cfg.Node != "" && it.node != p.cfg.Node {
		return it, false
	}
	want := p.objectLabels(it)
	for k, v := range want {
		if csc.Labels[k] != v {
			return it, false
		}
	}
	return it, true
}

// itemOf is the item an object says it is for.
func itemOf(csc *storagev1.CSIStorageCapacity) item {
	return item{class: csc.StorageClassName, node: csc.Annotations[AnnNode]}
}

// labelValue is s when it is a valid label value, else "sha256-" and a
// hash of it (a DNS subdomain may be longer than a label value).
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return "sha256-" + hash(s)[:40]
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Run keeps the objects up to date until ctx ends. Run it on the active
// instance only (controller.WithActiveTask): two replicas would each write
// the same objects.
func (p *Publisher) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("capacity")
	ctx = klog.NewContext(ctx, logger)
	p.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[item](),
		workqueue.TypedRateLimitingQueueConfig[item]{Name: "hostpath_csistoragecapacity"})
	defer p.queue.ShutDown()

	selector := p.Selector().String()
	factory := informers.NewSharedInformerFactoryWithOptions(p.cfg.Client, 0, informers.WithNamespace(p.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	objects := factory.Storage().V1().CSIStorageCapacities().Informer()
	p.objects = objects.GetIndexer()
	removeHandlers, err := p.addHandlers(objects)
	defer removeHandlers()
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	synced := []cache.InformerSynced{objects.HasSynced}
	for _, inf := range p.shared {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // stopped while starting
	}
	logger.Info("Publishing storage capacity", "namespace", p.cfg.Namespace, "selector", selector,
		"pollInterval", p.cfg.PollInterval, "nodeLabelKey", p.cfg.NodeLabelKey)
	p.enqueueAll()
	// One worker: the objects are few, and each sync reads caches only
	// before its one write.
	return workloop.Run(ctx, p.queue, workloop.Config[item]{
		Workers:       1,
		Sync:          p.sync,
		ErrorMessage:  "Could not publish storage capacity, will retry",
		KeysAndValues: func(it item) []any { return []any{"storageClass", it.class, "node", it.node} },
		ResyncPeriod:  p.cfg.PollInterval,
		Resync:        p.enqueueAll,
	})
}

// addHandlers registers the event handlers; the function returned removes
// those registered, even after an error.
func (p *Publisher) addHandlers(objects cache.SharedIndexInformer) (func(), error) {
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{p.shared[0], cache.ResourceEventHandlerFuncs{AddFunc: p.classChanged, DeleteFunc: p.classChanged}},
		{p.shared[1], cache.ResourceEventHandlerFuncs{AddFunc: p.volumeChanged, UpdateFunc: p.volumeUpdated, DeleteFunc: p.volumeChanged}},
		{objects, cache.ResourceEventHandlerFuncs{AddFunc: p.objectChanged, DeleteFunc: p.objectChanged}},
	}
	if p.nodes != nil {
		handlers = append(handlers, struct {
			inf cache.SharedIndexInformer
			h   cache.ResourceEventHandler
		}{p.shared[2], cache.ResourceEventHandlerFuncs{AddFunc: p.nodeChanged, UpdateFunc: p.nodeUpdated, DeleteFunc: p.nodeChanged}})
	}
	var removers []func()
	remove := func() {
		for _, r := range slices.Backward(removers) {
			r()
		}
	}
	for _, h := range handlers {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			return remove, err
		}
		removers = append(removers, func() { _ = h.inf.RemoveEventHandler(reg) })
	}
	return remove, nil
}

// enqueueAll queues every item that should have an object and every
// object's: the first are refreshed, the others deleted.
func (p *Publisher) enqueueAll() {
	for _, it := range p.wanted() {
		p.queue.Add(it)
	}
	for _, it := range p.published() {
		p.queue.Add(it)
	}
}

// published are the items of the cached objects this publisher owns.
func (p *Publisher) published() []item {
	var out []item
	for _, obj := range p.objects.List() {
		if csc, ok := obj.(*storagev1.CSIStorageCapacity); ok {
			if it, ours := p.owns(csc); ours {
				out = append(out, it)
			}
		}
	}
	return out
}

// wanted are the items of every class of the provisioner on each node
// served, whether their room is known or not.
func (p *Publisher) wanted() []item {
	classes, err := p.classes.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []item
	for _, class := range classes {
		out = append(out, p.classItems(class)...)
	}
	return out
}

// classItems are the items of class: one per node served, none when the
// class is not published.
func (p *Publisher) classItems(class *storagev1.StorageClass) []item {
	if !p.classWanted(class) {
		return nil
	}
	nodes, err := p.cfg.Source.ServedNodes(class.Name)
	if err != nil {
		return nil
	}
	var out []item
	for _, node := range nodes {
		if p.cfg.Node == "" || node == p.cfg.Node {
			out = append(out, item{class: class.Name, node: node})
		}
	}
	return out
}

// classWanted: only WaitForFirstConsumer classes are published, the only
// ones whose claims kube-scheduler checks against capacity.
func (p *Publisher) classWanted(class *storagev1.StorageClass) bool {
	if class.Provisioner != p.cfg.Provisioner || class.DeletionTimestamp != nil {
		return false
	}
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// The room an object says.
type room struct {
	topology       map[string]string
	total, largest int64
}

// desired is what the object of it should say; ok is false when there
// should be none (why says why, for the log).
func (p *Publisher) desired(it item) (r room, ok bool, why string, err error) {
	class, err := p.classes.Get(it.class)
	if err != nil || !p.classWanted(class) {
		return room{}, false, "", nil // a class gone, or not ours: no object
	}
	nodes, err := p.cfg.Source.ServedNodes(it.class)
	if err != nil {
		return room{}, false, fmt.Sprintf("StorageClass %s: %v", it.class, err), nil
	}
	if !slices.Contains(nodes, it.node) || (p.cfg.Node != "" && it.node != p.cfg.Node) {
		return room{}, false, "", nil
	}
	largest, total, known, err := p.cfg.Source.NodeRoom(it.class, it.node)
	switch {
	case err != nil:
		return room{}, false, "", err
	case !known:
		return room{}, false, "the room of a path is unknown (no pathCapacity, and its filesystem's size cannot be read): the scheduler sends no claim of the class to the node", nil
	}
	topology, why := p.topology(it)
	if topology == nil {
		return room{}, false, why, nil
	}
	return room{topology: topology, total: total, largest: largest}, true, "", nil
}

// topology is the nodeTopology's matchLabels for it: none on a shared path
// (every node), else the node's value of NodeLabelKey. nil means the node
// has no such label (why says so).
func (p *Publisher) topology(it item) (map[string]string, string) {
	if p.cfg.Source.SharedClass(it.class) {
		return map[string]string{}, ""
	}
	if p.nodes == nil {
		return map[string]string{p.cfg.NodeLabelKey: it.node}, ""
	}
	node, err := p.nodes.Get(it.node)
	if err != nil {
		return nil, fmt.Sprintf("reading node %s for its label %s (--node-label-key): %v", it.node, p.cfg.NodeLabelKey, err)
	}
	v, ok := node.Labels[p.cfg.NodeLabelKey]
	if !ok {
		return nil, fmt.Sprintf("node %s has no label %s (--node-label-key)", it.node, p.cfg.NodeLabelKey)
	}
	return map[string]string{p.cfg.NodeLabelKey: v}, ""
}

// quantity is n bytes as an object states it.
func quantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }

// sameQuantity compares two optional quantities.
func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}

// says tells whether csc already says r.
func (r room) says(csc *storagev1.CSIStorageCapacity) bool {
	return csc.NodeTopology != nil && len(csc.NodeTopology.MatchExpressions) == 0 &&
		maps.Equal(csc.NodeTopology.MatchLabels, r.topology) &&
		sameQuantity(csc.Capacity, quantity(r.total)) && sameQuantity(csc.MaximumVolumeSize, quantity(r.largest))
}
