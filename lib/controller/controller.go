// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/internal/cachedecode"
	"github.com/kubeprov/external-storage/lib/internal/events"
	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// ProvisionController watches claims and volumes and calls a Provisioner to
// create and delete their assets. Create one with NewProvisionController and
// start it with Run.
type ProvisionController struct {
	client      kubernetes.Interface
	name        string
	names       sets.Set[string]
	provisioner Provisioner
	cfg         config

	factory        informers.SharedInformerFactory
	claimInformer  cache.SharedIndexInformer
	volumeInformer cache.SharedIndexInformer
	classInformer  cache.SharedIndexInformer
	nodeInformer   cache.SharedIndexInformer // nil unless the provisioner is a SelectedNodeReader
	nodes          corelisters.NodeLister
	claims         corelisters.PersistentVolumeClaimLister
	volumes        corelisters.PersistentVolumeLister
	classes        storagelisters.StorageClassLister

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]
	saveQueue   workqueue.TypedRateLimitingInterface[string]

	journal  *journal.Journal
	events   *events.Recorder
	metrics  *metrics
	gatherer prometheus.Gatherer

	operations *operations
	saves      pendingSaves
	failures   failures
	syncLog    *syncFailures
	deleted    deletedVolumes
	saved      savedVolumes

	synced chan struct{} // closed once the informer caches have synced
	// leaderHealth watches the elector once leader election runs.
	leaderHealth *leaderelection.HealthzAdaptor
	access       accessProblems
	calls        runningCalls
}

// NewProvisionController returns a controller that serves claims whose
// storage class names provisionerName. Invalid options are reported as one
// error naming each of them.
func NewProvisionController(client kubernetes.Interface, provisionerName string, provisioner Provisioner, options ...Option) (*ProvisionController, error) {
	if err := checkArguments(client, provisionerName, provisioner); err != nil {
		return nil, err
	}
	cfg, err := newConfig(provisionerName, options)
	if err != nil {
		return nil, err
	}
	gatherer := cfg.useRegistry()
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	c := newController(client, provisionerName, provisioner, cfg, m, gatherer)
	c.readsFromProvisioner()
	if _, trimmed := c.factory.(trimmedFactory); !trimmed {
		// Shared informers may have started already; stripping is only a saving.
		for _, inf := range c.informers() {
			_ = inf.SetTransform(cachedecode.StripManagedFields)
		}
	}
	c.claimQueue = c.newQueue("claims")
	c.volumeQueue = c.newQueue("volumes")
	c.saveQueue = c.newQueue("volume-saves")

	if err := c.handleEvents(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkArguments rejects a missing argument, and a binary linked with
// modules the controller cannot work with.
func checkArguments(client kubernetes.Interface, provisionerName string, provisioner Provisioner) error {
	if client == nil {
		return errors.New("client is required")
	}
	if provisionerName == "" {
		return errors.New("provisioner name is required")
	}
	if provisioner == nil {
		return errors.New("provisioner is required")
	}
	return checkLinkedModules()
}

// newConfig applies the options to the defaults and validates the result,
// then fills in what depends on the others: the identity, the journal's
// name.
func newConfig(provisionerName string, options []Option) (config, error) {
	cfg := defaultConfig()
	var errs []error
	for _, o := range options {
		errs = append(errs, o.apply(&cfg))
	}
	errs = append(errs, cfg.validate())
	if err := errors.Join(errs...); err != nil {
		return config{}, fmt.Errorf("invalid ProvisionController options: %w", err)
	}
	if cfg.identity == "" {
		host, _ := os.Hostname()
		cfg.identity = host + "_" + string(uuid.NewUUID())
	}
	if cfg.journalName == "" {
		cfg.journalName = JournalName(provisionerName, "")
	}
	return cfg, nil
}

// useRegistry gives the metrics a private registry when no registerer was
// set, and returns the registry to gather from: that one, or the
// registerer when it is also a Gatherer (nil otherwise).
func (c *config) useRegistry() prometheus.Gatherer {
	if c.registerer == nil {
		reg := prometheus.NewRegistry()
		c.registerer = reg
		return reg
	}
	if g, ok := c.registerer.(prometheus.Gatherer); ok {
		return g
	}
	return nil
}

// newController assembles the controller: its informers (of the factory
// set, or one of its own), journal, event recorder and operations.
func newController(client kubernetes.Interface, provisionerName string, provisioner Provisioner, cfg config, m *metrics, gatherer prometheus.Gatherer) *ProvisionController {
	factory := cfg.informerFactory
	if factory == nil {
		factory = NewInformerFactory(client, cfg.resyncPeriod, nil)
	}
	eventClient := cfg.eventClient
	if eventClient == nil {
		eventClient = client
	}
	return &ProvisionController{
		client:         client,
		name:           provisionerName,
		names:          sets.New(append([]string{provisionerName}, cfg.extraNames...)...),
		provisioner:    provisioner,
		cfg:            cfg,
		factory:        factory,
		claimInformer:  factory.Core().V1().PersistentVolumeClaims().Informer(),
		volumeInformer: factory.Core().V1().PersistentVolumes().Informer(),
		classInformer:  factory.Storage().V1().StorageClasses().Informer(),
		claims:         factory.Core().V1().PersistentVolumeClaims().Lister(),
		volumes:        factory.Core().V1().PersistentVolumes().Lister(),
		classes:        factory.Storage().V1().StorageClasses().Lister(),
		journal: journal.New(journal.Config{Client: client, Namespace: cfg.journalNamespace, Name: cfg.journalName, Writes: m.journalWrites,
			Labels: map[string]string{LabelManagedBy: "kubeprov-external-storage"}, SystemAnnotations: systemClaimAnnotations}),
		events:       events.NewRecorder(eventClient, provisionerName, cfg.identity, cfg.eventFlushInterval, events.Metrics{Emitted: m.eventsEmitted, Written: m.eventsWritten}),
		metrics:      m,
		gatherer:     gatherer,
		operations:   newOperations(m.inFlight.WithLabelValues("provision")),
		synced:       make(chan struct{}),
		leaderHealth: leaderelection.NewLeaderHealthzAdaptor(cfg.leaderHealthTimeout),
		syncLog:      newSyncFailures(),
	}
}

// readsFromProvisioner sets up what the provisioner declares it reads: the
// claim metadata the journal keeps, the selected node's object.
func (c *ProvisionController) readsFromProvisioner() {
	if r, ok := c.provisioner.(ClaimMetadataReader); ok {
		c.journal.MetadataKeys = r.ClaimMetadataKeys
	}
	if r, ok := c.provisioner.(SelectedNodeReader); ok && r.ReadsSelectedNode() {
		c.nodeInformer = c.factory.Core().V1().Nodes().Informer()
		c.nodes = c.factory.Core().V1().Nodes().Lister()
	}
}

// newQueue returns a work queue whose retries back off exponentially from
// the retry interval's start to its max.
func (c *ProvisionController) newQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.cfg.retryStart, c.cfg.retryMax)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{
		Name: name, MetricsProvider: c.metrics.queues,
	})
}

// handleEvents queues the claims and volumes the informers report.
func (c *ProvisionController) handleEvents() error {
	if _, err := c.claimInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
		DeleteFunc: c.claimDeleted,
	}); err != nil {
		return err
	}
	_, err := c.volumeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, obj any) { c.volumeChanged(obj) },
		DeleteFunc: c.volumeDeleted,
	})
	return err
}

// informers are the informers the controller reads.
func (c *ProvisionController) informers() []cache.SharedIndexInformer {
	infs := []cache.SharedIndexInformer{c.claimInformer, c.volumeInformer, c.classInformer}
	if c.nodeInformer != nil {
		infs = append(infs, c.nodeInformer)
	}
	return infs
}

// CachesSynced is closed once Run has filled the informer caches: what
// follows is the steady state (package cli returns the start-up garbage to
// the operating system then).
func (c *ProvisionController) CachesSynced() <-chan struct{} { return c.synced }

// MetricsGatherer returns the registry the metrics are on when it is also a
// Gatherer (always for the default private registry), for a /metrics handler.
func (c *ProvisionController) MetricsGatherer() prometheus.Gatherer { return c.gatherer }

// Ready reports whether the controller can do its work: its informer caches
// have synced and neither its journal nor its Lease is known to be out of
// reach for lack of permission. Standby replicas under leader election are
// ready too: they take over at once.
func (c *ProvisionController) Ready() bool { return c.NotReadyReason() == nil }

// NotReadyReason says why Ready is false; nil when it is true.
func (c *ProvisionController) NotReadyReason() error {
	select {
	case <-c.synced:
	default:
		// With what keeps them from syncing, if it is a permission.
		return errors.Join(errors.New("informer caches not synced"), c.access.reason())
	}
	return c.access.reason()
}

// LeaderElectionHealthy is the liveness check of leader election, with the
// meaning of client-go's HealthzAdaptor (the CSI sidecars serve it at
// /healthz/leader-election): it fails only while this instance is the last
// holder it saw of the Lease and has not renewed it for the lease duration
// plus WithLeaderElectionHealthTimeout — it should have stopped by then, and
// something keeps it from doing so. A standby, a candidate and a controller
// without leader election are healthy.
func (c *ProvisionController) LeaderElectionHealthy(r *http.Request) error {
	return c.leaderHealth.Check(r)
}

// Run works until ctx ends, then lets running operations finish and returns.
// With leader election it returns an error when leadership is lost, so that
// the process can restart and stand by again.
func (c *ProvisionController) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("provisioner", c.name)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting provision controller", "identity", c.cfg.identity)
	defer c.claimQueue.ShutDown()
	defer c.volumeQueue.ShutDown()
	defer c.saveQueue.ShutDown()

	c.reportRefusedLists()
	c.factory.Start(ctx.Done())
	var synced []cache.InformerSynced
	for _, inf := range c.informers() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended before anything started: a stop, not a failure
	}
	close(c.synced)
	c.listsSynced(ctx)
	// Events run while Run does, not only while this instance leads: a
	// replica that cannot take the Lease tells the waiting claims why.
	eventsCtx, stopEvents := context.WithCancel(ctx)
	var events sync.WaitGroup
	events.Go(func() { c.events.Run(eventsCtx) })
	defer events.Wait()
	defer stopEvents()
	go c.probeJournalAccess(ctx)
	if !c.cfg.leaderElection {
		return c.runActive(ctx)
	}
	return c.runWithLeaderElection(ctx)
}

// runWithLeaderElection runs the active instance's work whenever this
// instance holds the leader Lease, until ctx ends or leadership is lost.
func (c *ProvisionController) runWithLeaderElection(ctx context.Context) error {
	meta := metaForLease(c.cfg.leaderNamespace, c.name, c.cfg.leaseName)
	l := &leadership{
		leading:        c.metrics.leader.WithLabelValues(meta.Name),
		done:           make(chan error, 1),
		workersStopped: make(chan struct{}),
	}
	l.leading.Set(0)
	// The elector gets a context of its own, ended only once the workers
	// have stopped after ctx ended: ReleaseOnCancel then hands the Lease
	// over when nothing of this instance still runs, never while its last
	// operations do (upstream's ReleaseLeaderElectionOnExit).
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	go l.stopElectingAfterWork(ctx, electCtx, stopElecting)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            c.leaseLock(ctx, meta),
		LeaseDuration:   c.cfg.leaseDuration,
		RenewDeadline:   c.cfg.renewDeadline,
		RetryPeriod:     c.cfg.retryPeriod,
		ReleaseOnCancel: true,
		Name:            c.name,
		Callbacks:       c.leaderCallbacks(ctx, l),
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	c.leaderHealth.SetLeaderElection(elector)
	elector.Run(electCtx)
	var runErr error
	if l.led.Load() {
		runErr = <-l.done
	}
	if ctx.Err() == nil {
		return errors.Join(errors.New("leader election lost"), runErr)
	}
	return runErr
}

// leadership is what runWithLeaderElection shares with the elector's
// callbacks.
type leadership struct {
	led            atomic.Bool      // it led: done gets runActive's result
	leading        prometheus.Gauge // leader_election_master_status
	done           chan error
	workersStopped chan struct{} // closed once the workers stopped after leading
}

// stopElectingAfterWork ends the elector's context once ctx ended and the
// workers, if this instance led, stopped; or when runWithLeaderElection
// returned (electCtx ended).
func (l *leadership) stopElectingAfterWork(ctx, electCtx context.Context, stopElecting context.CancelFunc) {
	select {
	case <-ctx.Done():
		if l.led.Load() {
			<-l.workersStopped
		}
	case <-electCtx.Done(): // runWithLeaderElection returned
	}
	stopElecting()
}

// leaseLock is the leader Lease as the elector uses it: every call's
// outcome observed (access problems, warnings), and each term this
// instance holds recorded for the journal's entries.
func (c *ProvisionController) leaseLock(ctx context.Context, meta metav1.ObjectMeta) observedLock {
	leaseName := fmt.Sprintf("Lease %s/%s (get, create, update on leases.coordination.k8s.io)", meta.Namespace, meta.Name)
	var warned time.Time
	return observedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  meta,
			Client:     c.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.cfg.identity},
			Labels:     c.cfg.leaseLabels,
		},
		observe: func(err error) { c.observeLease(ctx, leaseName, err, &warned) },
		held: func(r resourcelock.LeaderElectionRecord) {
			// A release writes no holder: the term that ends is not recorded.
			if r.HolderIdentity == c.cfg.identity {
				c.journal.Term.Store(&journal.LeaseTerm{Holder: r.HolderIdentity, Transitions: r.LeaderTransitions})
			}
		},
	}
}

// leaderCallbacks run the active instance's work while this instance
// leads: it ends when ctx ends or leadership is lost.
func (c *ProvisionController) leaderCallbacks(ctx context.Context, l *leadership) leaderelection.LeaderCallbacks {
	logger := klog.FromContext(ctx)
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: func(leadCtx context.Context) {
			l.led.Store(true)
			l.leading.Set(1)
			logger.Info("Became leader")
			// Work ends when ctx ends or leadership is lost.
			workCtx, stopWork := context.WithCancel(leadCtx)
			defer context.AfterFunc(ctx, stopWork)()
			err := c.runActive(workCtx)
			stopWork()
			close(l.workersStopped)
			l.done <- err
		},
		OnStoppedLeading: func() {
			l.leading.Set(0)
			logger.Info("Stopped leading")
		},
	}
}

// runActive does the work of the active instance until ctx ends.
func (c *ProvisionController) runActive(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	if err := c.resumeOperations(ctx); err != nil {
		wg.Wait()
		if ctx.Err() != nil {
			return nil // stopped (or leadership lost) while starting: no work began
		}
		return err
	}
	wg.Go(func() { c.journal.Run(ctx) })
	claimShare := newNamespaceShare(namespaceWorkerLimit(c.cfg.threadiness))
	for range c.cfg.threadiness {
		wg.Go(func() { c.work(ctx, "claims", c.claimQueue, c.syncClaim, claimShare) })
		wg.Go(func() { c.work(ctx, "volumes", c.volumeQueue, c.syncVolume, nil) })
	}
	wg.Go(func() { c.work(ctx, "volume-saves", c.saveQueue, c.syncSave, nil) })
	logger.Info("Workers started", "threadiness", c.cfg.threadiness)
	var tasks sync.WaitGroup
	taskCtx := context.WithValue(ctx, operationsKey{}, c.operations)
	for _, task := range c.cfg.activeTasks {
		tasks.Go(func() { task(taskCtx) })
	}
	<-ctx.Done()
	stopped := c.reportSlowStop(logger)
	tasks.Wait()
	c.claimQueue.ShutDownWithDrain()
	c.volumeQueue.ShutDownWithDrain()
	c.saveQueue.ShutDown()
	wg.Wait()
	stopped()
	// Removals are written lazily; write them now so that a restart does not
	// look again at operations that are over.
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), events.FinalFlushTimeout)
	defer cancel()
	if err := c.journal.FlushRemovals(final); err != nil {
		logger.Error(err, "Could not write the last journal removals; a restart will look at those claims again")
	}
	logger.Info("Workers stopped")
	return nil
}

// resumeOperations loads the in-flight journal: operations whose PV exists
// are done; the others are looked at again, whether their claim still exists
// or not.
func (c *ProvisionController) resumeOperations(ctx context.Context) error {
	entries, unverified, err := c.loadJournal(ctx)
	if err != nil {
		return err
	}
	for pvName, u := range unverified {
		c.leaveUnverified(ctx, pvName, u)
	}
	adopted := false
	for pvName, e := range entries {
		if c.resumeEntry(ctx, pvName, e) {
			adopted = true
		}
	}
	if adopted {
		c.journal.Poke()
	}
	return nil
}

// loadJournal loads the journal, retrying until it succeeds or ctx ends;
// meanwhile the waiting claims are told why, when an admin must act.
func (c *ProvisionController) loadJournal(ctx context.Context) (map[string]journal.Entry, map[string]journal.Unverified, error) {
	var entries map[string]journal.Entry
	var unverified map[string]journal.Unverified
	refusalTold := false
	err := retryUntil(ctx, c.cfg.retryStart, c.cfg.retryMax, func() error {
		var err error
		entries, unverified, err = c.journal.Load(ctx)
		c.access.observe(ctx, c.journal.Describe(), err)
		if err != nil && c.access.has(c.journal.Describe()) {
			c.warnWaitingClaims(journalForbiddenMessage, c.journal.Describe())
		}
		if gate.Refused(err) != "" && !refusalTold {
			// A key Secret the provisioner did not make: only an admin can
			// resolve it, and the claims must not wait in silence.
			refusalTold = c.warnWaitingClaims("The provisioner cannot start (will retry): %v", err) > 0
		}
		return err
	})
	return entries, unverified, err
}

// resumeEntry takes up the operation of one journal entry again and queues
// its claim; an entry this controller did not write, or whose PV exists, is
// forgotten. It reports whether the entry was adopted into the current
// Lease term (written with the journal's next write).
func (c *ProvisionController) resumeEntry(ctx context.Context, pvName string, e journal.Entry) (adopted bool) {
	if reason := c.foreignEntry(pvName, e); reason != "" {
		// Signed with our key, yet not what this controller would write
		// (its provisioner names or volume naming changed).
		klog.FromContext(ctx).Error(nil, "Ignoring in-flight journal entry this controller did not write", "key", pvName, "reason", reason)
		c.journal.Forget(pvName)
		return false
	}
	if pv, err := c.volumes.Get(pvName); err == nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == e.Claim.UID {
		c.journal.Forget(pvName)
		return false
	}
	key := e.Claim.Namespace + "/" + e.Claim.Name
	op := c.operations.track(pvName, key, e, true)
	logger := klog.FromContext(ctx).WithValues("pv", pvName, "claim", key, "assetID", e.AssetID)
	if op.leaseChange = c.leaseChangedSince(e); op.leaseChange != "" {
		logger.Info("Resuming in-flight operation written under another Lease holder's watch: if its claim is gone it is not provisioned again",
			"reason", op.leaseChange)
	} else {
		logger.Info("Resuming in-flight operation")
		adopted = c.adoptEntry(logger, pvName, e)
	}
	c.claimQueue.Add(key)
	return adopted
}

// adoptEntry records the current Lease term in an entry written under
// another term (or none); false when there is no term or the entry has it.
func (c *ProvisionController) adoptEntry(logger klog.Logger, pvName string, e journal.Entry) bool {
	term := c.journal.Term.Load()
	if term == nil || (e.Lease != nil && *e.Lease == *term) {
		return false
	}
	if err := c.journal.Adopt(pvName); err != nil {
		logger.Error(err, "Could not record the current Lease term in the journal entry")
	}
	return true
}

// leaseChangedSince says how the leader Lease shows that another identity
// held it since entry e was written, "" when it does not: no other holder,
// or no term on either side (an entry of an earlier version, a controller
// without leader election). Every change of holder adds one to the Lease's
// leaderTransitions; a restart under the same identity adds none.
func (c *ProvisionController) leaseChangedSince(e journal.Entry) string {
	now := c.journal.Term.Load()
	if e.Lease == nil || now == nil {
		return ""
	}
	want := e.Lease.Transitions
	if e.Lease.Holder != now.Holder {
		want++
	}
	switch {
	case now.Transitions == want:
		return ""
	case now.Transitions < want:
		return fmt.Sprintf("the leader Lease was recreated since %s wrote the entry at leader transition %d (now %d), so who held it meanwhile is unknown",
			e.Lease.Holder, e.Lease.Transitions, now.Transitions)
	}
	return fmt.Sprintf("another identity held the leader Lease since %s wrote the entry at leader transition %d (now %d): another provisioner may have served the claim and deleted its volume",
		e.Lease.Holder, e.Lease.Transitions, now.Transitions)
}

// leaveUnverified handles a journal entry this controller cannot prove it
// wrote: anyone who can write ConfigMaps in its namespace can add one, so it
// is never acted upon. One whose PV exists for its claim is done and
// dropped; one of a claim waiting for provisioning is replaced by the
// claim's own entry; any other is left in place and reported, since it may
// be an operation of an earlier version whose asset is left.
func (c *ProvisionController) leaveUnverified(ctx context.Context, pvName string, u journal.Unverified) {
	if u.Claim != nil && u.Claim.UID != "" {
		if pv, err := c.volumes.Get(pvName); err == nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == u.Claim.UID {
			c.journal.ForgetKept(pvName)
			return
		}
		if claim, err := c.claims.PersistentVolumeClaims(u.Claim.Namespace).Get(u.Claim.Name); err == nil &&
			claim.UID == u.Claim.UID && claim.DeletionTimestamp == nil {
			return
		}
	}
	logger := klog.FromContext(ctx)
	logger.Error(nil, "Leaving an in-flight journal entry this controller cannot prove it wrote; nothing is deleted on its word",
		"key", pvName, "configMap", klog.KRef(c.journal.Namespace(), c.journal.Name()), "reason", u.Reason, "claim", claimName(u.Claim))
	if u.Claim == nil || u.Claim.Name == "" || u.Claim.Namespace == "" {
		return
	}
	c.claimEvent(u.Claim, ClaimClass(u.Claim), corev1.EventTypeWarning, EventProvisioningCleanupSkipped,
		"In-flight journal entry %q in ConfigMap %s/%s names this claim but is not used: %s. If the claim was deleted while provisioning volume %s, an asset made for it may be left on the backend: check, delete it there, then remove the entry",
		pvName, c.journal.Namespace(), c.journal.Name(), u.Reason, pvName)
}

// claimName names a recorded claim in a log line ("" if there is none).
func claimName(claim *corev1.PersistentVolumeClaim) string {
	if claim == nil {
		return ""
	}
	return claim.Namespace + "/" + claim.Name + " (uid " + string(claim.UID) + ")"
}

// journalForbiddenMessage says what to grant, and the one way the library's
// own RBAC component adds nothing without an error (a label it selects on
// added by the same kustomization that lists it).
const journalForbiddenMessage = "The provisioner is not allowed to use its %s, so it cannot provision (will retry): grant its ServiceAccount these permissions" +
	" (the kustomize component lib/deploy/rbac grants them to the Role labeled " + RBACRoleLabel + ": namespace only if that label is in the Role's own YAML or a resource's kustomization:" +
	" a label added by patches or labels: of the kustomization listing the component comes too late, and it adds nothing)"

// RBACRoleLabel is the label the kustomize component lib/deploy/rbac selects
// the provisioner's ClusterRole (value "cluster") and Role (value
// "namespace") by, to append the library's rules to them.
const RBACRoleLabel = "rbac.kubeprov.io/lib"

// warnWaitingClaims tells every claim waiting for this provisioner why it
// cannot work (the message, formatted with args): otherwise they would wait
// in silence. It returns how many it told.
func (c *ProvisionController) warnWaitingClaims(format string, args ...any) int {
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return 0
	}
	told := 0
	for _, claim := range claims {
		if claim.Spec.VolumeName == "" && claim.DeletionTimestamp == nil && c.claimIsOurs(claim) {
			c.claimFailed(claim, ClaimClass(claim), format, args...)
			told++
		}
	}
	return told
}

// foreignEntry says why a journal entry cannot be one this controller wrote
// ("" if it can): its key must be the volume name this controller gives the
// recorded claim, and its class one of this controller's provisioner names.
func (c *ProvisionController) foreignEntry(pvName string, e journal.Entry) string {
	switch {
	case e.Claim.Name == "" || e.Claim.Namespace == "" || e.Claim.UID == "":
		return "the recorded claim has no name, namespace or UID"
	case pvName != c.cfg.volumeName(e.Claim):
		return "the key is not the volume name of the recorded claim"
	case e.Class == nil || !c.names.Has(e.Class.Provisioner):
		return "the recorded StorageClass is not one of this provisioner's"
	}
	return ""
}

// retryUntil calls f with exponential backoff until it succeeds or ctx ends.
func retryUntil(ctx context.Context, start, maxInterval time.Duration, f func() error) error {
	delay := start
	for {
		err := f()
		if err == nil {
			return nil
		}
		klog.FromContext(ctx).Error(err, "Retrying", "after", delay)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, maxInterval)
	}
}

// work is the classic worker loop: get, sync, forget or requeue with
// backoff. With a share, a key whose namespace holds its share of the
// workers is parked until one of them is released.
func (c *ProvisionController) work(ctx context.Context, queue string, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error, share *namespaceShare) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if share != nil && !share.take(key) {
			q.Done(key)
			continue
		}
		c.workOn(ctx, queue, q, sync, share, key)
	}
}

// workOn syncs one key taken from q, then forgets it or requeues it with
// backoff, and hands its namespace's share of the workers on.
func (c *ProvisionController) workOn(ctx context.Context, queue string, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error, share *namespaceShare, key string) {
	defer q.Done(key)
	if share != nil {
		defer func() {
			if next := share.release(key); next != "" {
				q.Add(next)
			}
		}()
	}
	defer c.recoverSync(ctx, q, key)
	if err := sync(ctx, key); err != nil {
		c.syncLog.failed(ctx, queue, key, err)
		q.AddRateLimited(key)
		return
	}
	c.syncLog.succeeded(queue, key)
	q.Forget(key)
}

// recoverSync, deferred, recovers a sync's panic and requeues its key: a
// panic must not take every other claim down with the process; the
// provisioner's calls recover their own (see recoverPanic), this is the last
// resort for the controller's.
func (c *ProvisionController) recoverSync(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], key string) {
	if r := recover(); r != nil {
		_ = c.panicked(ctx, "sync", key, r)
		q.AddRateLimited(key)
	}
}

// panicked logs and counts a recovered panic and returns the error for its
// event. The value a provisioner panics with may hold anything, secrets
// included: only the log, which operators read, gets it, and the event only
// a runtime error (a nil dereference, an index out of range).
func (c *ProvisionController) panicked(ctx context.Context, operation, key string, r any) error {
	c.metrics.panics.WithLabelValues(operation).Inc()
	klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", r), "Recovered from a panic; will retry", "operation", operation, "key", key, "stack", string(debug.Stack()))
	if re, ok := r.(runtime.Error); ok {
		return fmt.Errorf("the provisioner panicked: %w", re)
	}
	return errors.New("the provisioner panicked; its log has the details")
}

func (c *ProvisionController) claimChanged(obj any) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		unexpectedObject("claim changed", obj)
		return
	}
	key := claim.Namespace + "/" + claim.Name
	// Claims of other provisioners never enter the queue: clusters have many.
	if (claim.Spec.VolumeName == "" && c.claimIsOurs(claim)) || c.operations.hasClaim(key) {
		c.claimQueue.Add(key)
	}
}

func (c *ProvisionController) claimDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		unexpectedObject("claim deleted", obj)
		return
	}
	c.failures.reset(claimFailures(claim))
	key := claim.Namespace + "/" + claim.Name
	if c.operations.hasClaim(key) {
		c.claimQueue.Add(key)
	}
}

func (c *ProvisionController) volumeChanged(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		unexpectedObject("volume changed", obj)
		return
	}
	c.saved.remove(pv.Name)
	if !c.volumeIsOurs(pv) {
		return
	}
	// A PV that ends its operation may already be released: a claim deleted
	// while a repeated Provision saved its PV again gets no other event.
	c.operationSaved(pv)
	if pv.Status.Phase == corev1.VolumeReleased || pv.DeletionTimestamp != nil {
		c.volumeQueue.Add(pv.Name)
	}
}

func (c *ProvisionController) volumeDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		unexpectedObject("volume deleted", obj)
		return
	}
	c.deleted.remove(pv.UID)
	c.saved.remove(pv.Name)
	c.failures.reset(volumeFailures(pv))
}

// operationSaved ends the operation of a PV that has appeared, whoever saved it.
func (c *ProvisionController) operationSaved(pv *corev1.PersistentVolume) {
	if op := c.operations.get(pv.Name); op != nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == op.entry.Claim.UID {
		c.endOperation(pv.Name)
	}
}

// endOperation forgets an operation: its asset is saved as a PV or gone.
func (c *ProvisionController) endOperation(pvName string) {
	c.operations.end(pvName)
	c.journal.Forget(pvName)
}

// operationContext bounds one Provision or Delete call.
func (c *ProvisionController) operationContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.cfg.operationTimeout > 0 {
		return context.WithTimeout(ctx, c.cfg.operationTimeout)
	}
	return context.WithCancel(ctx)
}
