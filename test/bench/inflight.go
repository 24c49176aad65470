// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// fastClaims are the claims measured while the slow ones are in flight.
const fastClaims = 100

// inFlight is what measureInFlight measured.
type inFlight struct {
	slow                  int
	hold                  time.Duration
	toInFlight            time.Duration // provisioner started with the slow claims waiting → all their operations in flight
	fast                  provisionStats
	configMaps            int
	journalKB             float64
	entries               int
	drained               time.Duration // all in flight → every slow claim Bound
	leftEntries           int           // journal entries once all are bound and the removals written
	mainWrites            float64       // PV path writes, all claims of the phase
	eventWrites           float64
	journalWrites         float64
	rssInFlightMB, peakMB float64
}

// measureInFlight keeps n operations in flight with a backend that answers
// "in background" for hold, then measures 100 more claims: they must not
// wait for the slow ones (the journal holding n operations is what used to
// stall them). It then waits until every slow claim is bound.
func measureInFlight(ctx context.Context, s *subject, n int, hold time.Duration) (*inFlight, error) {
	admin := s.admin
	slowNS, err := framework.CreateNamespace(ctx, admin, "inflight-slow")
	if err != nil {
		return nil, err
	}
	fastNS, err := framework.CreateNamespace(ctx, admin, "inflight-fast")
	if err != nil {
		return nil, err
	}
	x := &inFlight{slow: n, hold: hold}
	// The claims are created and named by kube-controller-manager while no
	// provisioner runs (it names them at a few dozen per second on this
	// machine, which would let the first volumes finish before the last
	// claims are in flight); then the provisioner starts on all of them.
	s.stop()
	logf("in flight: creating %d claims the backend takes %v for", n, hold)
	if err := createClaims(ctx, admin, slowNS, s.class, strings.TrimSuffix(slowPrefix, "-"), n); err != nil {
		return nil, err
	}
	if err := poll(ctx, time.Second, func() (bool, error) {
		annotated, err := countClaims(ctx, admin, slowNS, func(pvc *corev1.PersistentVolumeClaim) bool {
			return pvc.Annotations[framework.AnnStorageProvisioner] == s.b.ProvisionerName()
		})
		logf("in flight: %d/%d claims named", annotated, n)
		return annotated == n, err
	}); err != nil {
		return nil, err
	}
	beforeReq := s.api.snapshot()
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	before, err := scrape(s.p)
	if err != nil {
		return nil, err
	}
	start := s.started
	if err := poll(ctx, time.Second, func() (bool, error) {
		m, err := scrape(s.p)
		if err != nil {
			return false, err
		}
		got := m.sum("controller_inflight_operations", map[string]string{"operation": "provision"})
		logf("in flight: %.0f/%d", got, n)
		return got >= float64(n), nil
	}); err != nil {
		return nil, err
	}
	x.toInFlight = time.Since(start)
	inFlightAt := time.Now()
	x.rssInFlightMB = procStatusMB(s.p.Pid(), "VmRSS:")

	logf("in flight: %d more claims", fastClaims)
	rec := newRecorder(fastNS)
	factory := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(fastNS))
	_, _ = factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { rec.claimSeen(obj.(*corev1.PersistentVolumeClaim)) },
		AddFunc:    func(obj any) { rec.claimSeen(obj.(*corev1.PersistentVolumeClaim)) },
	})
	volumes := informers.NewSharedInformerFactory(admin, 0)
	_, _ = volumes.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { rec.volumeAdded(obj.(*corev1.PersistentVolume)) },
	})
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	volumes.Start(stop)
	factory.WaitForCacheSync(stop)
	volumes.WaitForCacheSync(stop)
	if err := parallel(ctx, fastClaims, func(i int) error {
		t := time.Now()
		created, err := admin.CoreV1().PersistentVolumeClaims(fastNS).Create(ctx, framework.NewPVC(fastNS, fmt.Sprintf("fast-%d", i), s.class, "1Gi"), metav1.CreateOptions{})
		if err == nil {
			rec.claimCreated(created.UID, t)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := rec.waitBound(ctx, fastClaims); err != nil {
		return nil, err
	}
	x.fast = rec.provisionStats()

	journal := controller.JournalName(s.b.ProvisionerName(), "")
	count := func() (configMaps, entries, bytes int, err error) {
		list, err := admin.CoreV1().ConfigMaps(s.home).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, 0, err
		}
		for _, cm := range list.Items {
			if cm.Name != journal && !strings.HasPrefix(cm.Name, journal+"-") {
				continue
			}
			configMaps++
			for k, v := range cm.Data {
				bytes += len(k) + len(v)
				if !strings.HasPrefix(k, "_class.") {
					entries++
				}
			}
		}
		return configMaps, entries, bytes, nil
	}
	var bytes int
	if x.configMaps, x.entries, bytes, err = count(); err != nil {
		return nil, err
	}
	x.journalKB = float64(bytes) / 1024

	logf("in flight: waiting for the %d slow claims to be bound", n)
	if err := waitBound(ctx, admin, slowNS, n); err != nil {
		return nil, err
	}
	x.drained = time.Since(inFlightAt)
	// The removals are written lazily (within 5 s).
	if err := poll(ctx, time.Second, func() (bool, error) {
		_, entries, _, err := count()
		x.leftEntries = entries
		return entries == 0 || time.Since(inFlightAt) > x.drained+30*time.Second, err
	}); err != nil {
		return nil, err
	}
	after, err := settled(ctx, s)
	if err != nil {
		return nil, err
	}
	requests := diff(s.api.snapshot(), beforeReq)
	x.mainWrites = writesBy(requests, "main")
	x.eventWrites = writesBy(requests, "events")
	x.journalWrites = after.sum("controller_journal_writes_total", nil) - before.sum("controller_journal_writes_total", nil)
	x.peakMB = peakRSSMB(s.p)
	return x, nil
}

func reportInFlight(out io.Writer, h string, x *inFlight) {
	volumes := float64(x.slow + fastClaims)
	fmt.Fprintf(out, "\n%s %d operations in flight\n\n", h, x.slow)
	fmt.Fprintf(out, "A backend that answers \"in background\" for %v from the first call for each of %d claims; %d more claims while all of them are in flight.\n\n", x.hold, x.slow, fastClaims)
	fmt.Fprintf(out, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(out, "| provisioner started with the %d claims waiting → all their operations in flight (recorded in the journal) | %.1f s |\n", x.slow, x.toInFlight.Seconds())
	fmt.Fprintf(out, "| journal while they are in flight | %d ConfigMaps, %d entries, %.0f KB |\n", x.configMaps, x.entries, x.journalKB)
	q := quantiles(x.fast.fromAnnotated)
	fmt.Fprintf(out, "| %d more claims: provisioner named → PV created, p50 / p90 / p99 | %s |\n", fastClaims, strings.Join(q, " / "))
	q = quantiles(x.fast.toPV)
	fmt.Fprintf(out, "| %d more claims: PVC created → PV created, p50 / p90 / p99 | %s |\n", fastClaims, strings.Join(q, " / "))
	fmt.Fprintf(out, "| all in flight → every slow claim Bound | %.1f s |\n", x.drained.Seconds())
	fmt.Fprintf(out, "| journal entries left after that (removals written) | %d |\n", x.leftEntries)
	fmt.Fprintf(out, "| writes of the PV path per volume (PVs and journal) | %.3f (journal %.0f writes) |\n", x.mainWrites/volumes, x.journalWrites)
	fmt.Fprintf(out, "| writes of events per volume (a Warning and a count update per retry of a slow claim) | %.3f |\n", x.eventWrites/volumes)
	fmt.Fprintf(out, "| provisioner RSS with all in flight / peak | %.1f / %.1f MB |\n", x.rssInFlightMB, x.peakMB)
}
