// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// durationBuckets reach 10 minutes: slow backends (cloud volumes, helper
// pods) routinely take longer than the 10 s where common defaults stop.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600}

// metrics keeps the names dashboards of the established provisioners use.
type metrics struct {
	provisionTotal    *prometheus.CounterVec
	provisionFailed   *prometheus.CounterVec
	provisionDuration *prometheus.HistogramVec
	deleteTotal       *prometheus.CounterVec
	deleteFailed      *prometheus.CounterVec
	deleteDuration    *prometheus.HistogramVec
	inFlight          *prometheus.GaugeVec
	eventsEmitted     *prometheus.CounterVec
	eventsWritten     *prometheus.CounterVec
	journalWrites     prometheus.Counter
	panics            *prometheus.CounterVec
	leader            *prometheus.GaugeVec
	stopOverdue       *prometheus.CounterVec
	queues            *queueMetrics
}

// newMetrics registers the controller's metrics on r, in groups.
func newMetrics(r prometheus.Registerer) (*metrics, error) {
	rg := &registrar{r: r}
	m := &metrics{}
	m.registerProvision(rg)
	m.registerDelete(rg)
	m.registerWork(rg)
	m.registerHealth(rg)
	m.queues = newQueueMetrics(rg)
	return m, rg.err
}

// registerProvision registers the metrics of provisioning.
func (m *metrics) registerProvision(rg *registrar) {
	m.provisionTotal = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_persistentvolumeclaim_provision_total",
		Help: "Volumes provisioned, by storage class and data source kind.",
	}, []string{"class", "source"}))
	m.provisionFailed = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_persistentvolumeclaim_provision_failed_total",
		Help: "Failed provisioning attempts, by storage class and data source kind.",
	}, []string{"class", "source"}))
	m.provisionDuration = registerAs(rg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "controller_persistentvolumeclaim_provision_duration_seconds",
		Help:    "Time from the first provisioning attempt to the saved PV, by storage class and data source kind.",
		Buckets: durationBuckets,
	}, []string{"class", "source"}))
}

// registerDelete registers the metrics of deletion.
func (m *metrics) registerDelete(rg *registrar) {
	m.deleteTotal = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_persistentvolume_delete_total",
		Help: "Volumes deleted, by storage class.",
	}, []string{"class"}))
	m.deleteFailed = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_persistentvolume_delete_failed_total",
		Help: "Failed deletion attempts, by storage class.",
	}, []string{"class"}))
	m.deleteDuration = registerAs(rg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "controller_persistentvolume_delete_duration_seconds",
		Help:    "Time to delete a volume's asset and PV, by storage class.",
		Buckets: durationBuckets,
	}, []string{"class"}))
}

// registerWork registers the metrics of what the controller runs and
// writes: calls in flight, events, journal writes.
func (m *metrics) registerWork(rg *registrar) {
	m.inFlight = registerAs(rg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "controller_inflight_operations",
		Help: "Provision and delete calls running now.",
	}, []string{"operation"}))
	m.eventsEmitted = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_events_emitted_total",
		Help: "Events the controller produced, by type.",
	}, []string{"type"}))
	m.eventsWritten = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_events_written_total",
		Help: "Event API writes, by kind: single, aggregated (one write for many events) or repeat (a count update).",
	}, []string{"kind"}))
	m.journalWrites = registerAs(rg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "controller_journal_writes_total",
		Help: "Writes of the in-flight operation journal.",
	}))
}

// registerHealth registers the metrics of how the instance fares: panics,
// calls that outlive a stop, leadership.
func (m *metrics) registerHealth(rg *registrar) {
	m.panics = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_panics_recovered_total",
		Help: "Panics recovered in the provisioner's Provision or Delete, or in the controller's own sync, by operation.",
	}, []string{"operation"}))
	m.stopOverdue = registerAs(rg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_stop_overdue_calls_total",
		Help: "Provision and delete calls still running a stop grace period after a stop canceled their context (they ignore it), by operation.",
	}, []string{"operation"}))
	// client-go's leader election gauge (component-base registers it
	// for the CSI sidecars), here on the controller's own registry.
	m.leader = registerAs(rg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "1 while this instance holds the leader Lease, 0 while it stands by; name is the Lease's name.",
	}, []string{"name"}))
}

// registrar registers collectors and gathers the errors.
type registrar struct {
	r   prometheus.Registerer
	err error
}

// registerAs registers c; when an equal collector is there already (a second
// controller on the same registry) that one is returned, so both controllers
// count into the same series.
func registerAs[T prometheus.Collector](rg *registrar, c T) T {
	err := rg.r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	rg.err = errors.Join(rg.err, err)
	return c
}

// queueMetrics implements workqueue.MetricsProvider on a given registry
// instead of the process-global one.
type queueMetrics struct {
	adds, retries               *prometheus.CounterVec
	depthGauge, unfinished, lrp *prometheus.GaugeVec
	latency, workDuration       *prometheus.HistogramVec
}

func newQueueMetrics(rg *registrar) *queueMetrics {
	q := &queueMetrics{
		depthGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth", Help: "Current depth of the work queue."}, []string{"name"}),
		adds:       prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total", Help: "Adds handled by the work queue."}, []string{"name"}),
		retries:    prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total", Help: "Retries handled by the work queue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "Time an item waits in the queue before it is worked on.", Buckets: durationBuckets}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "Time spent working on an item.", Buckets: durationBuckets}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
		lrp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running worker has been busy."}, []string{"name"}),
	}
	q.depthGauge = registerAs(rg, q.depthGauge)
	q.adds = registerAs(rg, q.adds)
	q.retries = registerAs(rg, q.retries)
	q.latency = registerAs(rg, q.latency)
	q.workDuration = registerAs(rg, q.workDuration)
	q.unfinished = registerAs(rg, q.unfinished)
	q.lrp = registerAs(rg, q.lrp)
	return q
}

func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depthGauge.WithLabelValues(name)
}
func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}
func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}
func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name)
}
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.lrp.WithLabelValues(name)
}
func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
