// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// Defaults of the options. Each option documents its own.
const (
	DefaultResyncPeriod             = 15 * time.Minute
	DefaultThreadiness              = 4
	DefaultRetryIntervalStart       = 1 * time.Second
	DefaultRetryIntervalMax         = 5 * time.Minute
	DefaultFailedProvisionThreshold = 15
	DefaultFailedDeleteThreshold    = 15
	DefaultOperationTimeout         = 10 * time.Minute
	DefaultLeaseDuration            = 15 * time.Second
	DefaultRenewDeadline            = 10 * time.Second
	DefaultRetryPeriod              = 2 * time.Second
	// DefaultLeaderElectionHealthTimeout is how long past its lease duration
	// a leader that has not renewed its Lease still answers healthy: the CSI
	// sidecars' (csi-lib-utils) value.
	DefaultLeaderElectionHealthTimeout = 20 * time.Second
	// OutOfClusterNamespace is the namespace of the journal, and of the
	// Lease, when the controller runs outside a cluster; in a pod it is the
	// pod's own (InClusterNamespace).
	OutOfClusterNamespace   = "default"
	DefaultVolumeNamePrefix = "pvc"
	DefaultAddFinalizer     = false
	// DefaultUnprovisionedVolumeDeletion leaves PVs the controller did not
	// provision alone (WithUnprovisionedVolumeDeletion).
	DefaultUnprovisionedVolumeDeletion = false
	// DefaultEventFlushInterval is how long Normal events are gathered before
	// they are written; during a burst the gathered ones are aggregated.
	DefaultEventFlushInterval = 1 * time.Second
	// DefaultStopGracePeriod is how long a stop waits for the running
	// Provision and Delete calls before it reports those still running, well
	// within a pod's default 30 s termination grace period.
	DefaultStopGracePeriod = 10 * time.Second
)

// VolumeFinalizer is put on PVs when WithFinalizer(true) is set, so that
// deleting the PV object before its claim still deletes the asset.
const VolumeFinalizer = "kubeprov.io/volume-cleanup"

// SigStorageLibFinalizer is the finalizer sig-storage-lib-external-provisioner
// (and the CSI external-provisioner built on it) puts on its PVs. The
// controller treats it as its own on the PVs it serves, so that volumes made
// before a port are deleted and never left Terminating.
const SigStorageLibFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"

// serviceAccountNamespaceFile is where a pod finds its namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// InClusterNamespace returns the namespace of the pod this process runs in:
// POD_NAMESPACE (set from the downward API) or else the namespace of its
// service account; ok is false outside a cluster.
func InClusterNamespace() (namespace string, ok bool) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, true
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns, true
		}
	}
	return "", false
}

// Option configures a ProvisionController.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	extraNames               []string
	resyncPeriod             time.Duration
	threadiness              int
	retryStart, retryMax     time.Duration
	failedProvisionThreshold int
	failedDeleteThreshold    int
	operationTimeout         time.Duration
	leaderElection           bool
	leaderNamespace          string
	leaseDuration            time.Duration
	renewDeadline            time.Duration
	retryPeriod              time.Duration
	leaderHealthTimeout      time.Duration
	leaseLabels              map[string]string
	identity                 string
	registerer               prometheus.Registerer
	informerFactory          informers.SharedInformerFactory
	volumeName               func(*corev1.PersistentVolumeClaim) string
	addFinalizer             bool
	finalizer                string
	leaseName                string
	journalNamespace         string
	journalName              string
	eventClient              kubernetes.Interface
	eventFlushInterval       time.Duration
	activeTasks              []func(context.Context)
	unprovisionedDeletion    bool
	stopGracePeriod          time.Duration
}

func defaultConfig() config {
	namespace, inCluster := InClusterNamespace()
	if !inCluster {
		namespace = OutOfClusterNamespace
	}
	return config{
		resyncPeriod:             DefaultResyncPeriod,
		threadiness:              DefaultThreadiness,
		retryStart:               DefaultRetryIntervalStart,
		retryMax:                 DefaultRetryIntervalMax,
		failedProvisionThreshold: DefaultFailedProvisionThreshold,
		failedDeleteThreshold:    DefaultFailedDeleteThreshold,
		operationTimeout:         DefaultOperationTimeout,
		leaseDuration:            DefaultLeaseDuration,
		renewDeadline:            DefaultRenewDeadline,
		retryPeriod:              DefaultRetryPeriod,
		leaderHealthTimeout:      DefaultLeaderElectionHealthTimeout,
		journalNamespace:         namespace,
		// As in sig-storage-lib-external-provisioner: a second replica of a
		// Deployment must not provision the same claims.
		leaderElection:        inCluster,
		leaderNamespace:       namespace,
		addFinalizer:          DefaultAddFinalizer,
		unprovisionedDeletion: DefaultUnprovisionedVolumeDeletion,
		finalizer:             VolumeFinalizer,
		eventFlushInterval:    DefaultEventFlushInterval,
		stopGracePeriod:       DefaultStopGracePeriod,
		volumeName: func(claim *corev1.PersistentVolumeClaim) string {
			return DefaultVolumeNamePrefix + "-" + string(claim.UID)
		},
	}
}

// validate rejects combinations that cannot work, naming the option.
func (c *config) validate() error {
	return errors.Join(slices.Concat(c.workErrors(), c.leaderElectionErrors(), c.nameErrors(), c.stopErrors())...)
}

// workErrors checks the options of the workers: their number, retries,
// thresholds and timeouts.
func (c *config) workErrors() []error {
	var errs []error
	if c.threadiness < 1 {
		errs = append(errs, fmt.Errorf("WithThreadiness: must be at least 1, got %d", c.threadiness))
	}
	if c.retryStart <= 0 || c.retryMax < c.retryStart {
		errs = append(errs, fmt.Errorf("WithRetryInterval: need 0 < start <= max, got start %v, max %v", c.retryStart, c.retryMax))
	}
	if c.failedProvisionThreshold < 0 || c.failedDeleteThreshold < 0 {
		errs = append(errs, errors.New("failure thresholds must be 0 (retry forever) or more"))
	}
	if c.operationTimeout < 0 {
		errs = append(errs, fmt.Errorf("WithOperationTimeout: must be 0 (none) or more, got %v", c.operationTimeout))
	}
	if c.resyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("WithResyncPeriod: must be 0 (never) or more, got %v", c.resyncPeriod))
	}
	return errs
}

// leaderElectionErrors checks the options of leader election, when it is on.
func (c *config) leaderElectionErrors() []error {
	if !c.leaderElection {
		return nil
	}
	var errs []error
	if c.leaderNamespace == "" {
		errs = append(errs, errors.New("WithLeaderElection: namespace is required"))
	}
	if !(c.leaseDuration > c.renewDeadline && c.renewDeadline > c.retryPeriod && c.retryPeriod > 0) {
		errs = append(errs, fmt.Errorf("WithLeaderElectionTimings: need lease duration > renew deadline > retry period > 0, got %v, %v, %v",
			c.leaseDuration, c.renewDeadline, c.retryPeriod))
	}
	return errs
}

// nameErrors checks the names the controller gives objects: the finalizer,
// the Lease, the journal's ConfigMaps.
func (c *config) nameErrors() []error {
	var errs []error
	if msgs := validation.IsQualifiedName(c.finalizer); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("WithFinalizerName: %q is not a valid finalizer: %s", c.finalizer, strings.Join(msgs, "; ")))
	}
	if c.leaseName != "" {
		if msgs := validation.IsDNS1123Subdomain(c.leaseName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("WithLeaseName: %q is not a valid Lease name: %s", c.leaseName, strings.Join(msgs, "; ")))
		}
	}
	if c.journalNamespace == "" {
		errs = append(errs, errors.New("WithJournal: namespace is required"))
	}
	if last := journal.ShardName(c.journalName, journal.Shards-1); c.journalName != "" && len(last) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, fmt.Errorf("WithJournal: name %q too long: the journal's last ConfigMap, %q, must have at most %d characters",
			c.journalName, last, validation.DNS1123SubdomainMaxLength))
	}
	return errs
}

// stopErrors checks the periods of a stop and of event writes.
func (c *config) stopErrors() []error {
	var errs []error
	if c.stopGracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("WithStopGracePeriod: must be more than 0, got %v", c.stopGracePeriod))
	}
	if c.eventFlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("WithEventFlushInterval: must be more than 0, got %v", c.eventFlushInterval))
	}
	return errs
}

// WithExtraProvisionerNames makes the controller also serve claims and
// volumes of these provisioner names (for example a name used before a rename).
func WithExtraProvisionerNames(names ...string) Option {
	return optionFunc(func(c *config) error {
		for _, n := range names {
			if n == "" {
				return errors.New("WithExtraProvisionerNames: empty name")
			}
		}
		c.extraNames = append(c.extraNames, names...)
		return nil
	})
}

// WithResyncPeriod sets how often every claim and volume is looked at again
// even without a change. Default DefaultResyncPeriod; 0 disables resync.
func WithResyncPeriod(d time.Duration) Option {
	return optionFunc(func(c *config) error { c.resyncPeriod = d; return nil })
}

// WithThreadiness sets how many claims and how many volumes are worked on at
// once (each). Default DefaultThreadiness.
func WithThreadiness(n int) Option {
	return optionFunc(func(c *config) error { c.threadiness = n; return nil })
}

// WithRetryInterval sets the per-item exponential backoff of failed
// operations: the first retry after start, doubling up to max. Defaults
// DefaultRetryIntervalStart and DefaultRetryIntervalMax.
func WithRetryInterval(start, maxInterval time.Duration) Option {
	return optionFunc(func(c *config) error { c.retryStart, c.retryMax = start, maxInterval; return nil })
}

// WithFailedProvisionThreshold sets after how many failed attempts a claim is
// given up (with a Warning event) until it changes or the controller
// restarts; 0 retries forever. Default DefaultFailedProvisionThreshold.
// Operations that may still complete in the background are never given up.
func WithFailedProvisionThreshold(n int) Option {
	return optionFunc(func(c *config) error { c.failedProvisionThreshold = n; return nil })
}

// WithFailedDeleteThreshold is WithFailedProvisionThreshold for deletion.
// Default DefaultFailedDeleteThreshold.
func WithFailedDeleteThreshold(n int) Option {
	return optionFunc(func(c *config) error { c.failedDeleteThreshold = n; return nil })
}

// WithOperationTimeout bounds each Provision and Delete call through its
// context; 0 means no bound. Default DefaultOperationTimeout.
func WithOperationTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { c.operationTimeout = d; return nil })
}

// WithLeaderElection makes replicas elect one active controller through a
// Lease in namespace (one Lease per provisioner name; LeaseName). Default:
// on in a pod, with the Lease in the pod's namespace (InClusterNamespace);
// off outside a cluster.
func WithLeaderElection(namespace string) Option {
	return optionFunc(func(c *config) error { c.leaderElection, c.leaderNamespace = true, namespace; return nil })
}

// WithoutLeaderElection makes every instance active: for one instance per
// node (each serving only its node's claims) or a single replica that does
// not want the Lease's API writes.
func WithoutLeaderElection() Option {
	return optionFunc(func(c *config) error { c.leaderElection = false; return nil })
}

// WithLeaderElectionTimings sets the Lease timings. Defaults
// DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod.
func WithLeaderElectionTimings(leaseDuration, renewDeadline, retryPeriod time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.leaseDuration, c.renewDeadline, c.retryPeriod = leaseDuration, renewDeadline, retryPeriod
		return nil
	})
}

// WithLeaderElectionHealthTimeout sets how long past its lease duration a
// leader that failed to renew its Lease still passes LeaderElectionHealthy.
// Default DefaultLeaderElectionHealthTimeout.
func WithLeaderElectionHealthTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithLeaderElectionHealthTimeout: %v is negative", d)
		}
		c.leaderHealthTimeout = d
		return nil
	})
}

// WithLeaseLabels puts labels on the leader Lease, written by whichever
// replica holds it (for example to find a driver's Leases with a label
// selector). Default: none.
func WithLeaseLabels(labels map[string]string) Option {
	return optionFunc(func(c *config) error {
		var errs []error
		for k, v := range labels {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("WithLeaseLabels: key %q: %s", k, strings.Join(msgs, "; ")))
			}
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("WithLeaseLabels: value %q of %q: %s", v, k, strings.Join(msgs, "; ")))
			}
		}
		c.leaseLabels = maps.Clone(labels)
		return errors.Join(errs...)
	})
}

// WithIdentity names this instance in the leader Lease and in events.
// Default: the host name plus a random suffix.
func WithIdentity(identity string) Option {
	return optionFunc(func(c *config) error { c.identity = identity; return nil })
}

// WithMetricsRegisterer registers the controller's metrics on r. Default: a
// private registry, available from MetricsGatherer. The global registry is
// never used, so several controllers can live in one process.
func WithMetricsRegisterer(r prometheus.Registerer) Option {
	return optionFunc(func(c *config) error {
		if r == nil {
			return errors.New("WithMetricsRegisterer: nil registerer")
		}
		c.registerer = r
		return nil
	})
}

// WithInformerFactory shares the caller's informers for claims, volumes and
// classes instead of starting private ones. Run starts the factory. Make it
// with NewInformerFactory to keep the controller's small caches.
func WithInformerFactory(f informers.SharedInformerFactory) Option {
	return optionFunc(func(c *config) error { c.informerFactory = f; return nil })
}

// WithVolumeNameFunc overrides how PV names are made. Default:
// "pvc-<claim uid>". The name must be stable for a claim: retries rely on it.
func WithVolumeNameFunc(f func(*corev1.PersistentVolumeClaim) string) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("WithVolumeNameFunc: nil function")
		}
		c.volumeName = f
		return nil
	})
}

// WithFinalizer puts a finalizer (VolumeFinalizer, or WithFinalizerName's)
// on new PVs, so that deleting a PV object directly still deletes its asset
// first. Default DefaultAddFinalizer.
func WithFinalizer(add bool) Option {
	return optionFunc(func(c *config) error { c.addFinalizer = add; return nil })
}

// WithFinalizerName names the finalizer WithFinalizer puts on new PVs.
// Default VolumeFinalizer. SigStorageLibFinalizer keeps the PVs as the CSI
// external-provisioner and sig-storage-lib-external-provisioner make them,
// so that either can take them back. The controller removes any of the
// three from the PVs it serves.
func WithFinalizerName(name string) Option {
	return optionFunc(func(c *config) error { c.finalizer = name; return nil })
}

// WithLeaseName names the leader Lease. Default LeaseName(provisioner name).
// A provisioner that replaces another one gives that one's Lease name, so
// that during a rolling update old and new replicas elect one leader.
func WithLeaseName(name string) Option {
	return optionFunc(func(c *config) error { c.leaseName = name; return nil })
}

// WithJournal sets the ConfigMap that records in-flight operations so that a
// controller killed mid-operation finds and finishes them after a restart.
// Default namespace: the pod's (InClusterNamespace), or OutOfClusterNamespace
// outside a cluster; default name JournalName(provisioner name, ""). When
// thousands of operations are in flight the journal spills into ConfigMaps
// named "<name>-1" to "<name>-31", so instances that run side by side (one
// per node) need names that differ by more than such a suffix.
func WithJournal(namespace, name string) Option {
	return optionFunc(func(c *config) error { c.journalNamespace, c.journalName = namespace, name; return nil })
}

// WithEventClient writes events through a client of their own, so that a
// burst of events never takes API budget from PV writes. Default: the main
// client.
func WithEventClient(client kubernetes.Interface) Option {
	return optionFunc(func(c *config) error { c.eventClient = client; return nil })
}

// WithEventFlushInterval sets how long Normal events are gathered before they
// are written. Default DefaultEventFlushInterval.
func WithEventFlushInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error { c.eventFlushInterval = d; return nil })
}

// WithStopGracePeriod sets how long a stop (Run's context ending, or
// leadership lost) waits for the running Provision and Delete calls, whose
// contexts it canceled, before it logs each one still running at default
// verbosity and counts it in controller_stop_overdue_calls_total; it logs
// them again every such period while it waits. It never abandons a call.
// Default DefaultStopGracePeriod.
func WithStopGracePeriod(d time.Duration) Option {
	return optionFunc(func(c *config) error { c.stopGracePeriod = d; return nil })
}

// WithActiveTask runs task while this instance is the active one: from when
// its workers start (after leader election is won, with leader election)
// until they stop, when the context task gets ends (leadership lost or Run
// returning). Run waits for task to return. Use it for work that, like
// provisioning, only one replica may do at a time, such as publishing
// objects that replicas would otherwise write over each other.
func WithActiveTask(task func(ctx context.Context)) Option {
	return optionFunc(func(c *config) error {
		if task == nil {
			return errors.New("WithActiveTask: task must not be nil")
		}
		c.activeTasks = append(c.activeTasks, task)
		return nil
	})
}

// WithUnprovisionedVolumeDeletion makes the controller also delete, once
// Released with reclaim policy Delete, the PVs sig-storage-lib-external-provisioner
// v13 deletes that it did not provision: statically created CSI PVs (no
// pv.kubernetes.io/provisioned-by annotation) whose spec.csi.driver is one
// of its provisioner names, and PVs whose pv.kubernetes.io/migrated-to
// annotation names one (in-tree volumes handed over by CSI migration). It
// is for CSI provisioners, whose provisioner name is the driver's: their
// Delete receives such PVs as they are and must check the volume source
// itself (returning an IgnoredError for any other). Default
// DefaultUnprovisionedVolumeDeletion.
func WithUnprovisionedVolumeDeletion(enabled bool) Option {
	return optionFunc(func(c *config) error { c.unprovisionedDeletion = enabled; return nil })
}
