// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package httpendpoint

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// However often /readyz is asked, a cached backend check runs once per TTL.
func TestReadinessProbesDoNotHammerTheBackend(t *testing.T) {
	var calls atomic.Int32
	backend := func(*http.Request) error {
		calls.Add(1)
		return errors.New("Ganesha is not running")
	}
	h := NewHandler(Options{Ready: map[string]Check{"backend": Cached(backend, time.Hour)}})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503 from the cached failure", rec.Code)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("50 probes called the backend %d times, want 1", n)
	}

	// Past the TTL (none here) the backend is asked again.
	check := Cached(backend, 0)
	_ = check(nil)
	_ = check(nil)
	if n := calls.Load(); n != 3 {
		t.Fatalf("backend called %d times in all, want 3", n)
	}
}

// TestPprofOnlyWhenAsked: profiles are served only with Pprof set.
func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := NewHandler(Options{Pprof: on})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		if rec.Code != want {
			t.Errorf("Pprof %v: /debug/pprof/ answered %d, want %d", on, rec.Code, want)
		}
		if on && !strings.Contains(rec.Body.String(), "goroutine") {
			t.Errorf("/debug/pprof/ does not list the goroutine profile:\n%s", rec.Body)
		}
	}
}

// TestEachCheckAlone: a probe written for one check (the CSI sidecars'
// /healthz/leader-election) asks that one only; the aggregate path asks all.
func TestEachCheckAlone(t *testing.T) {
	failing := func(*http.Request) error { return errors.New("driver socket missing") }
	ok := func(*http.Request) error { return nil }
	h := NewHandler(Options{
		Live:  map[string]Check{"leader-election": ok},
		Ready: map[string]Check{"controller": ok, "csi-driver": failing},
	})
	for path, want := range map[string]int{
		"/healthz":                 http.StatusOK,
		"/healthz/leader-election": http.StatusOK,
		"/healthz/other":           http.StatusNotFound,
		"/readyz":                  http.StatusServiceUnavailable,
		"/readyz/controller":       http.StatusOK,
		"/readyz/csi-driver":       http.StatusServiceUnavailable,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("%s answered %d, want %d:\n%s", path, rec.Code, want, rec.Body)
		}
	}
}

// TestMetricsHandlerCountsItsScrapes: as the CSI sidecars' endpoint, /metrics
// serves promhttp_metric_handler_requests_total (by status code) and
// _requests_in_flight; the second scrape sees the first counted.
func TestMetricsHandlerCountsItsScrapes(t *testing.T) {
	registry := prometheus.NewRegistry()
	h := NewHandler(Options{Gatherer: registry, Registerer: registry})
	var body string
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("/metrics answered %d:\n%s", rec.Code, rec.Body)
		}
		body = rec.Body.String()
	}
	for _, want := range []string{
		`promhttp_metric_handler_requests_total{code="200"} 1`,
		"promhttp_metric_handler_requests_in_flight 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the second scrape has no line %q:\n%s", want, body)
		}
	}
}
