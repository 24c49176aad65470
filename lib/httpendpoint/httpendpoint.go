// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package httpendpoint serves a provisioner's /metrics, /healthz and /readyz
// (and each check alone under them) on a mux of its own (never
// http.DefaultServeMux).
package httpendpoint

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports a dependency's health: nil when healthy.
type Check func(r *http.Request) error

// DefaultMetricsPath is where metrics are served unless told otherwise.
const DefaultMetricsPath = "/metrics"

// DefaultProbeCacheTTL is how long Cached keeps a check's answer.
const DefaultProbeCacheTTL = 5 * time.Second

// Cached returns a check that calls c at most once per ttl and answers with
// its last result in between: a check that reaches a backend (a Cinder
// endpoint, Ganesha's D-Bus, a driver socket) must not be called by every
// probe or scraper that asks, and concurrent requests wait for one call
// instead of each making their own.
func Cached(c Check, ttl time.Duration) Check {
	var (
		mu   sync.Mutex
		at   time.Time
		last error
	)
	return func(r *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < ttl {
			return last
		}
		last, at = c(r), time.Now()
		return last
	}
}

// Options of the handler.
type Options struct {
	// Gatherer provides the metrics; nil serves no /metrics.
	Gatherer prometheus.Gatherer
	// Registerer, usually the Gatherer's registry, receives the metrics
	// handler's own promhttp_metric_handler_requests_total and
	// _requests_in_flight, which the CSI sidecars serve and dashboards
	// written for them read; nil leaves them out.
	Registerer prometheus.Registerer
	// MetricsPath defaults to DefaultMetricsPath.
	MetricsPath string
	// Live checks answer /healthz: failing means the process should restart.
	Live map[string]Check
	// Ready checks answer /readyz: failing means do not send work yet
	// (caches not synced, driver socket or backend unreachable).
	Ready map[string]Check
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/.
	Pprof bool
}

// NewHandler returns the mux. Each check endpoint answers 200 "ok" or 503
// with one line per failed check naming it, and ?verbose lists every check;
// /healthz/<name> and /readyz/<name> answer for one check.
func NewHandler(o Options) http.Handler {
	mux := http.NewServeMux()
	if o.Gatherer != nil {
		path := o.MetricsPath
		if path == "" {
			path = DefaultMetricsPath
		}
		metrics := promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})
		if o.Registerer != nil {
			metrics = promhttp.InstrumentMetricHandler(o.Registerer, metrics)
		}
		mux.Handle(path, metrics)
	}
	if o.Pprof {
		// Registered on this mux, not through the package's import side
		// effect on http.DefaultServeMux.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	handleChecks(mux, "/healthz", o.Live)
	handleChecks(mux, "/readyz", o.Ready)
	return mux
}

// handleChecks serves all checks at path and each one alone at path/<name>,
// as the Kubernetes components do: a probe written for one check (the CSI
// sidecars' /healthz/leader-election) asks only that one.
func handleChecks(mux *http.ServeMux, path string, checks map[string]Check) {
	mux.Handle(path, checksHandler(checks))
	for name, check := range checks {
		mux.Handle(path+"/"+name, checksHandler(map[string]Check{name: check}))
	}
}

func checksHandler(checks map[string]Check) http.Handler {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var report strings.Builder
		failed := false
		for _, n := range names {
			if err := checks[n](r); err != nil {
				failed = true
				fmt.Fprintf(&report, "[-]%s failed: %v\n", n, err)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", n)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprint(w, report.String())
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			_, _ = fmt.Fprint(w, report.String())
		}
		_, _ = fmt.Fprint(w, "ok\n")
	})
}
