// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench measures provisioners against the real control plane and
// prints the results as Markdown: claims/s and latency percentiles for each
// stage, API requests per volume, events written versus emitted, memory,
// deletion, the raw API ceiling at the same client settings, and a restart
// with many bound claims.
//
// Each provisioner under test runs as a separate process, exactly as users
// run it, on a control plane of its own, and talks to the API through a
// proxy that counts its every request. By default that is the library's
// controller alone (lib: test/cmd/faultprovisioner with an in-memory
// provisioner); -backends adds the real provisioners with their storage
// (test/backend) and a summary table with one row each:
//
//	go run ./bench -n 1000 -qps 200 -burst 400
//	go run ./bench -backends hostpath,csi,nfs,cinder,flex
//	go run ./bench -backends hostpath,csi -n 50 -restart-claims 0
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/kubeprov/external-storage/lib/httpendpoint"
	"github.com/kubeprov/external-storage/test/backend/all"
	"github.com/kubeprov/external-storage/test/framework"
)

type config struct {
	backends               []string
	n, restartClaims       *sizes
	restartProvisioned     *sizes
	burst, workers, kcmQPS int
	qps                    float64
	timeout                time.Duration
	inflight               int
	inflightHold           time.Duration
	restartRuns            int
	restartProfile         bool
	restartKCM             string
	// restartQuietLoad, if above 0, is the load average (1 min) each
	// restart waits for: the binding before the first restart, and each
	// restart's own start-up, leave the machine busy for a while.
	restartQuietLoad float64
	// restartDirect: restarts talk to kube-apiserver directly, not through
	// the counting proxy (see measureRestart).
	restartDirect bool
	// proxyH2: the counting proxy serves TLS with HTTP/2, not plain
	// HTTP/1.1 (see newAPICounter).
	proxyH2 bool
	// cpuProfileDir, if set, receives CPU profiles of the provisioner's
	// first cpuProfileFor of the burst and of the backlog.
	cpuProfileDir string
	cpuProfileFor time.Duration
}

// profiling: the provisioner serves /debug/pprof/.
func (c config) profiling() bool { return c.restartProfile || c.cpuProfileDir != "" }

// Default sizes per provisioner: the library alone and the two provisioners
// without a storage system to wait for take the large bursts. The restart
// measurement binds its claims through the real storage, except where the
// storage is slow: the flex test driver makes about 5 volumes/s (a shell and
// jq per call), Ganesha about 2 exports/s once it holds hundreds, and this
// Cinder about 2 volumes/s, so 10,000 would take up to an hour and a half.
// There the rest are copies of the provisioned PVs made through the API: a
// restart reads bound volumes from the API only and never asks the storage
// about them, so a copy weighs on it exactly like the original.
var (
	defaultClaims             = map[string]int{libName: 1000, "hostpath": 2000, "csi": 2000, "nfs": 500, "cinder": 500, "flex": 500}
	defaultRestartClaims      = map[string]int{libName: 10000, "hostpath": 10000, "csi": 10000, "nfs": 10000, "cinder": 10000, "flex": 10000}
	defaultRestartProvisioned = map[string]int{libName: 10000, "hostpath": 10000, "csi": 10000, "nfs": 500, "cinder": 200, "flex": 500}
)

// sizes is a flag giving a number per subject: "50" for all, or
// "hostpath=2000,nfs=100" for some, the others keeping their defaults.
type sizes struct {
	defaults map[string]int
	all      *int
	set      map[string]int
}

func newSizes(defaults map[string]int) *sizes {
	return &sizes{defaults: defaults, set: map[string]int{}}
}

func (z *sizes) of(name string) int {
	if n, ok := z.set[name]; ok {
		return n
	}
	if z.all != nil {
		return *z.all
	}
	return z.defaults[name]
}

func (z *sizes) String() string {
	if z == nil {
		return ""
	}
	var parts []string
	for _, name := range append([]string{libName}, all.Names...) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, z.of(name)))
	}
	return strings.Join(parts, ",")
}

func (z *sizes) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		z.all = &n
		return nil
	}
	for item := range strings.SplitSeq(v, ",") {
		name, count, ok := strings.Cut(item, "=")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 0 {
			return fmt.Errorf("%q: want a count, or name=count,... with names from %s,%s", item, libName, strings.Join(all.Names, ","))
		}
		if _, err := all.Parse(name, libName); err != nil {
			return err
		}
		z.set[name] = n
	}
	return nil
}

func main() {
	c := config{n: newSizes(defaultClaims), restartClaims: newSizes(defaultRestartClaims), restartProvisioned: newSizes(defaultRestartProvisioned)}
	backends := libName
	flag.StringVar(&backends, "backends", backends, "provisioners to measure, comma-separated: "+libName+" (the library's controller alone), "+strings.Join(all.Names, ", "))
	flag.Var(c.n, "n", "claims created at once: a count for every provisioner, or name=count,... for some")
	flag.Float64Var(&c.qps, "qps", 200, "controller --kube-api-qps")
	flag.IntVar(&c.burst, "burst", 400, "controller --kube-api-burst")
	flag.IntVar(&c.workers, "workers", 100, "controller --worker-threads")
	flag.Var(c.restartClaims, "restart-claims", "bound claims for the restart measurement (0 skips it): a count for every provisioner, or name=count,... for some")
	flag.Var(c.restartProvisioned, "restart-provisioned", "of the restart's bound claims, how many go through the storage; the rest are API-made copies of their PVs (same forms)")
	flag.IntVar(&c.kcmQPS, "kcm-qps", 2000, "kube-controller-manager QPS, high so that its binder does not mask the provisioner")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "bound of each provisioner's run")
	flag.IntVar(&c.restartRuns, "restart-runs", 1, "restarts measured on the same bound claims (binding 100,000 takes about 20 minutes, a restart seconds)")
	flag.StringVar(&c.restartKCM, "restart-kcm", kcmRunning, "kube-controller-manager during each restart: "+kcmRunning+", "+kcmPaused+" (SIGSTOP until the provisioner is idle: in a cluster it runs on other machines, here it shares the 2 cores), or "+kcmAlternate+" (running, paused, running, ...)")
	flag.Float64Var(&c.restartQuietLoad, "restart-quiet-load", 0, "before each restart, wait (up to 10 min) until the load average (1 min) is at most this, so that a start-up is not measured on a machine still busy from the binding or the previous start-up (0: start at once)")
	flag.BoolVar(&c.restartDirect, "restart-direct", false, "restarts connect the provisioner to kube-apiserver directly, as in a cluster, not through the counting proxy, which shares the 2 cores (its CPU is a row of the table); writes are then counted from kube-apiserver's apiserver_request_total, every client's but the Leases' (kube-controller-manager should be paused: -restart-kcm paused)")
	flag.BoolVar(&c.proxyH2, "proxy-h2", false, "the counting proxy serves TLS with HTTP/2, as kube-apiserver does, instead of plain HTTP/1.1 (where the provisioner's clients dial connections beyond the 25 they keep idle)")
	flag.BoolVar(&c.restartProfile, "restart-profile", false, "save a CPU profile of each restart's start-up and a heap profile when idle into the run's directory (the provisioner runs with --enable-pprof)")
	flag.StringVar(&c.cpuProfileDir, "cpuprofile", "", "directory to save CPU profiles of the provisioner into (it runs with --enable-pprof): <name>-burst-cpu.pprof over the burst's first -cpuprofile-for, <name>-backlog-cpu.pprof over the backlog's")
	flag.DurationVar(&c.cpuProfileFor, "cpuprofile-for", 20*time.Second, "length of each -cpuprofile profile, in whole seconds")
	flag.IntVar(&c.inflight, "inflight", 0, "lib only: claims a slow backend keeps \"in background\" (-inflight-hold) while 100 more claims are measured (0 skips it)")
	flag.DurationVar(&c.inflightHold, "inflight-hold", 90*time.Second, "lib only: how long the slow backend takes for each of -inflight's claims")
	budgetClaims := flag.Int("budget", 0, "instead of the other measurements: hostpath-provisioner's budgets, this many claims over 4 node-local instances of 2 paths, with and without pathCapacity (see budget.go)")
	flag.Parse()
	var err error
	if c.backends, err = all.Parse(backends, libName); err == nil && len(c.backends) == 0 {
		err = errors.New("name at least one provisioner")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -backends %q: %v\n", backends, err)
		os.Exit(2)
	}
	if !slices.Contains([]string{kcmRunning, kcmPaused, kcmAlternate}, c.restartKCM) {
		fmt.Fprintf(os.Stderr, "bench: -restart-kcm %q: want %s, %s or %s\n", c.restartKCM, kcmRunning, kcmPaused, kcmAlternate)
		os.Exit(2)
	}
	if c.cpuProfileDir != "" {
		if err := os.MkdirAll(c.cpuProfileDir, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if *budgetClaims > 0 {
		err = runBudget(ctx, c, *budgetClaims, os.Stdout)
	} else {
		err = run(ctx, c, os.Stdout)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// libOnly: the default run, whose output is the library's report alone.
func (c config) libOnly() bool { return len(c.backends) == 1 && c.backends[0] == libName }

func run(ctx context.Context, c config, out io.Writer) error {
	fmt.Fprintf(out, "# Provisioning benchmark\n\n%s\n\n", machine(c))
	var results []*result
	for _, name := range c.backends {
		r, err := measure(ctx, name, c, out)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
	}
	if !c.libOnly() {
		summary(out, c, results)
	}
	return nil
}

// result is what one provisioner measured, for the summary.
type result struct {
	name          string
	burst         *phase
	ceiling       float64
	restartClaims int
	provisioned   int // of restartClaims, those that went through the storage
	restarts      []*restart
}

// measure runs every measurement of one provisioner on a control plane of
// its own and prints its details; heading levels nest under its name unless
// the library is measured alone.
func measure(ctx context.Context, name string, c config, out io.Writer) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	h := "##"
	if !c.libOnly() {
		fmt.Fprintf(out, "## %s\n\n", name)
		h = "###"
	}
	s, err := newSubject(ctx, name, c)
	if err != nil {
		return nil, err
	}
	failed := true
	defer func() {
		s.close()
		if failed {
			logf("%s: logs and state kept in %s", name, s.dir)
		} else {
			_ = os.RemoveAll(s.dir)
		}
	}()
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	r := &result{name: name, restartClaims: c.restartClaims.of(name)}
	r.provisioned = min(r.restartClaims, c.restartProvisioned.of(name))
	if n := c.n.of(name); n > 0 {
		if r.burst, err = measureBurst(ctx, s, n, "burst"); err != nil {
			return nil, err
		}
		if r.ceiling, err = rawCeiling(ctx, s, n); err != nil {
			return nil, err
		}
		report(out, h, c, r.burst, r.ceiling)
		s.stop()
		alone, err := measureBacklog(ctx, s, n)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "\nThe provisioner alone: with %d annotated claims already waiting, a freshly started provisioner created their PVs at **%.1f PVs/s** "+
			"(from process start to the last PV; %.0f%% of the raw ceiling), with %.3f API writes of the PV path per volume and **%.2f s of CPU per 1000 volumes**.\n",
			n, alone.rate, 100*alone.rate/r.ceiling, alone.writes, 1000*alone.cpu/float64(n))
	}

	if r.restartClaims > 0 {
		if err := bindForRestart(ctx, s, r.restartClaims, r.provisioned); err != nil {
			return nil, err
		}
		if c.restartDirect {
			if err := s.connectDirectly(); err != nil {
				return nil, err
			}
		}
		for i := range max(1, c.restartRuns) {
			pause := c.restartKCM == kcmPaused || (c.restartKCM == kcmAlternate && i%2 == 1)
			waitQuiet(ctx, c.restartQuietLoad)
			x, err := measureRestart(ctx, s, c.restartProfile, pause)
			if err != nil {
				return nil, err
			}
			r.restarts = append(r.restarts, x)
		}
		fmt.Fprintf(out, "\n%s Restart with %d bound claims\n\n", h, r.restartClaims)
		if r.provisioned < r.restartClaims {
			fmt.Fprintf(out, "%d of them provisioned through the storage, the other %d bound to API-made copies of their PVs.\n\n", r.provisioned, r.restartClaims-r.provisioned)
		}
		row := func(measure, format string, value func(*restart) float64) {
			fmt.Fprintf(out, "| %s |", measure)
			for _, x := range r.restarts {
				fmt.Fprintf(out, " "+format+" |", value(x))
			}
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "| measure |%s\n|---|%s\n", strings.Repeat(" restart |", len(r.restarts)), strings.Repeat("---|", len(r.restarts)))
		fmt.Fprint(out, "| kube-controller-manager during the start |")
		for _, x := range r.restarts {
			fmt.Fprintf(out, " %s |", kcmState(x.kcmPaused))
		}
		fmt.Fprintln(out)
		row("time from start to ready (/readyz)", "%.2f s", func(x *restart) float64 { return x.ready.Seconds() })
		row("time from start to idle (work queues empty)", "%.2f s", func(x *restart) float64 { return x.idle.Seconds() })
		row("provisioner CPU until idle", "%.2f s", func(x *restart) float64 { return x.cpu })
		row("kube-controller-manager CPU from start to idle", "%.2f s", func(x *restart) float64 { return x.kcmCPU })
		row("kube-apiserver CPU from start to idle", "%.2f s", func(x *restart) float64 { return x.apiserverCPU })
		row("the benchmark's own CPU (its counting proxy, unless -restart-direct, and its polling) from start to idle", "%.2f s", func(x *restart) float64 { return x.benchCPU })
		row("kube-apiserver garbage collections from start to idle", "%.0f", func(x *restart) float64 { return x.apiserverGCs })
		row("load average (1 min) before the start", "%.1f", func(x *restart) float64 { return x.loadBefore })
		row("load average (1 min) at idle", "%.1f", func(x *restart) float64 { return x.load })
		row("API writes during start-up", "%.0f", func(x *restart) float64 { return x.writes })
		row("RSS when idle", "%.1f MB", func(x *restart) float64 { return x.rssMB })
		row("heap in use when idle", "%.1f MB", func(x *restart) float64 { return x.heapMB })
		row(fmt.Sprintf("RSS %s after idle", settleTime), "%.1f MB", func(x *restart) float64 { return x.rssLaterMB })
	}
	if c.inflight > 0 && name == libName {
		x, err := measureInFlight(ctx, s, c.inflight, c.inflightHold)
		if err != nil {
			return nil, err
		}
		reportInFlight(out, h, x)
	}
	if !c.libOnly() {
		fmt.Fprintln(out)
	}
	failed = false
	return r, nil
}

// machine describes where the numbers come from.
func machine(c config) string {
	provisioners := "test/cmd/faultprovisioner (lib's controller with an in-memory provisioner)"
	if !c.libOnly() {
		provisioners = "each on a control plane of its own: " + strings.Join(c.backends, ", ") +
			" (lib: test/cmd/faultprovisioner, lib's controller with an in-memory provisioner; the others: the project's binaries with their real storage, see test/backend)"
	}
	return machineWith(c, provisioners)
}

// machineWith describes the machine and the control plane the provisioners
// described run on.
func machineWith(c config, provisioners string) string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			mem = fmt.Sprintf(", %.0f GiB", kb/1024/1024)
		}
	}
	return fmt.Sprintf("Machine: %d cores (%s)%s, %s. Real etcd, kube-apiserver and kube-controller-manager v1.36.3 on loopback "+
		"(kube-controller-manager at --kube-api-qps=%d so that its binder does not mask the provisioner). "+
		"Provisioner: %s at --kube-api-qps=%g "+
		"--kube-api-burst=%d --worker-threads=%d; events through their own client with the same limits; "+
		"every request counted by a proxy in front of kube-apiserver.",
		runtime.NumCPU(), model, mem, runtime.Version(), c.kcmQPS, provisioners, c.qps, c.burst, c.workers)
}

// peakRSSMB is a process's high-water mark of resident memory.
func peakRSSMB(p *framework.Process) float64 { return procStatusMB(p.Pid(), "VmHWM:") }

// loadAverage is the machine's one-minute load average (0 if unreadable).
// waitQuiet waits until the load average (1 min) is at most load, for at
// most 10 minutes; the restart's table reports the load it started at.
func waitQuiet(ctx context.Context, load float64) {
	if load <= 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Minute)
	for l := loadAverage(); l > load; l = loadAverage() {
		if time.Now().After(deadline) {
			logf("load average still %.1f after 10 minutes, starting anyway", l)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

func procStatusMB(pid int, key string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key) {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// procCPUSeconds is the CPU time (user and system) process pid has used,
// 0 if it cannot be read.
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th of them, in ticks.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicksPerSecond
}

// clockTicksPerSecond is USER_HZ, 100 on Linux.
const clockTicksPerSecond = 100

// metrics is one scrape of a provisioner's /metrics.
type metrics map[string]*dto.MetricFamily

func scrape(p *framework.Process) (metrics, error) {
	resp, err := http.Get("http://" + p.Endpoint + httpendpoint.DefaultMetricsPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return parseMetrics(resp.Body)
}

// parseMetrics parses Prometheus text.
func parseMetrics(r io.Reader) (metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// apiserverGCCount is the number of garbage collections kube-apiserver has
// made, from its /metrics (0 if unreadable, logged).
func apiserverGCCount(ctx context.Context, admin kubernetes.Interface) float64 {
	data, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err == nil {
		var m metrics
		if m, err = parseMetrics(bytes.NewReader(data)); err == nil {
			if f := m["go_gc_duration_seconds"]; f != nil && len(f.Metric) == 1 {
				return float64(f.Metric[0].GetSummary().GetSampleCount())
			}
			err = errors.New("no go_gc_duration_seconds")
		}
	}
	logf("kube-apiserver's garbage collections: %v", err)
	return 0
}

// sum adds the values of family whose labels include match.
func (m metrics) sum(family string, match map[string]string) float64 {
	f := m[family]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, metric := range f.Metric {
		ok := true
		for k, v := range match {
			found := false
			for _, l := range metric.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case metric.Counter != nil:
			total += metric.Counter.GetValue()
		case metric.Gauge != nil:
			total += metric.Gauge.GetValue()
		}
	}
	return total
}

// phase is what one burst measured.
type phase struct {
	n int
	provisionStats
	delete                    []time.Duration
	deleteRate                float64
	provRequests, delRequests map[string]float64
	eventsEmitted, warnings   float64
	failedAttempts            float64 // provisioning attempts that failed and were retried
	eventsWritten             map[string]float64
	journalWrites             float64
	// cpu is the provisioner's CPU time from the first claim created until
	// the burst's events and journal settled.
	cpu               float64
	peakRSSMB, heapMB float64
	problems          []string // assets that disagree with the PVs
}

// measureBurst creates n claims at once, waits for all to bind, then deletes them all.
func measureBurst(ctx context.Context, s *subject, n int, prefix string) (*phase, error) {
	admin := s.admin
	ns, err := framework.CreateNamespace(ctx, admin, prefix)
	if err != nil {
		return nil, err
	}
	rec := newRecorder(ns)
	factory := informers.NewSharedInformerFactory(admin, 0)
	_, _ = factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { rec.claimSeen(obj.(*corev1.PersistentVolumeClaim)) },
		AddFunc:    func(obj any) { rec.claimSeen(obj.(*corev1.PersistentVolumeClaim)) },
	})
	_, _ = factory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.volumeAdded(obj.(*corev1.PersistentVolume)) },
		DeleteFunc: rec.volumeDeleted,
	})
	stopInformers := make(chan struct{})
	defer close(stopInformers)
	factory.Start(stopInformers)
	factory.WaitForCacheSync(stopInformers)

	before, err := scrape(s.p)
	if err != nil {
		return nil, err
	}
	beforeRequests := s.api.snapshot()
	profiled := s.profileCPU(ctx, prefix)
	defer func() { <-profiled }()
	logf("creating %d claims", n)
	if err := parallel(ctx, n, func(i int) error {
		pvc := framework.NewPVC(ns, fmt.Sprintf("%s-%d", prefix, i), s.class, "1Gi")
		t := time.Now()
		created, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err == nil {
			rec.claimCreated(created.UID, t)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := rec.waitBound(ctx, n); err != nil {
		return nil, err
	}
	res := &phase{n: n, provisionStats: rec.provisionStats()}
	// Count the events written and the journal settled after the last claim
	// bound as the burst's too: at least the journal's lazy removals (5 s),
	// then until no event has been written for 2 s.
	time.Sleep(6 * time.Second)
	afterProv, err := settled(ctx, s)
	if err != nil {
		return nil, err
	}
	res.provRequests = diff(s.api.snapshot(), beforeRequests)
	res.eventsEmitted = afterProv.sum("controller_events_emitted_total", nil) - before.sum("controller_events_emitted_total", nil)
	res.warnings = afterProv.sum("controller_events_emitted_total", map[string]string{"type": corev1.EventTypeWarning}) -
		before.sum("controller_events_emitted_total", map[string]string{"type": corev1.EventTypeWarning})
	res.failedAttempts = afterProv.sum("controller_persistentvolumeclaim_provision_failed_total", nil) -
		before.sum("controller_persistentvolumeclaim_provision_failed_total", nil)
	res.eventsWritten = map[string]float64{}
	for _, kind := range []string{"single", "aggregated", "repeat"} {
		res.eventsWritten[kind] = afterProv.sum("controller_events_written_total", map[string]string{"kind": kind}) -
			before.sum("controller_events_written_total", map[string]string{"kind": kind})
	}
	res.journalWrites = afterProv.sum("controller_journal_writes_total", nil) - before.sum("controller_journal_writes_total", nil)
	res.cpu = afterProv.sum("process_cpu_seconds_total", nil) - before.sum("process_cpu_seconds_total", nil)
	res.heapMB = afterProv.sum("go_memstats_heap_inuse_bytes", nil) / 1024 / 1024
	if problem := s.checkAssets(ctx, "after the burst"); problem != "" {
		res.problems = append(res.problems, problem)
	}

	logf("deleting %d claims", n)
	beforeDel := s.api.snapshot()
	if err := parallel(ctx, n, func(i int) error {
		name := fmt.Sprintf("%s-%d", prefix, i)
		rec.deleteIssued(name, time.Now())
		return admin.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}); err != nil {
		return nil, err
	}
	if err := rec.waitVolumesGone(ctx, n); err != nil {
		return nil, err
	}
	res.delRequests = diff(s.api.snapshot(), beforeDel)
	res.delete, res.deleteRate = rec.deleteStats()
	// The high-water mark of the whole burst, creation and deletion.
	res.peakRSSMB = peakRSSMB(s.p)
	if problem := s.checkAssets(ctx, "after the deletion"); problem != "" {
		res.problems = append(res.problems, problem)
	}
	return res, nil
}

// settled scrapes the provisioner until its events written stay the same for 2 s.
func settled(ctx context.Context, s *subject) (metrics, error) {
	last, err := scrape(s.p)
	if err != nil {
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
		m, err := scrape(s.p)
		if err != nil {
			return nil, err
		}
		if m.sum("controller_events_written_total", nil) == last.sum("controller_events_written_total", nil) {
			return m, nil
		}
		last = m
	}
}

// parallel runs f for 0..n-1 on 32 goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// rawCeiling is how fast a plain client with the controller's QPS settings
// creates PVs: the upper bound for any provisioner with those settings. It
// goes through the counting proxy too, as the provisioner does.
func rawCeiling(ctx context.Context, s *subject, n int) (float64, error) {
	cfg := rest.CopyConfig(s.api.Config)
	cfg.QPS, cfg.Burst = float32(s.c.qps), s.c.burst
	plain := kubernetes.NewForConfigOrDie(cfg)
	logf("raw ceiling: %d PVs from a client at %g/%d", n, s.c.qps, s.c.burst)
	start := time.Now()
	if err := parallel(ctx, n, func(i int) error {
		pv := framework.NewPV(fmt.Sprintf("ceiling-%d", i), "bench-ceiling", "1Gi")
		_, err := plain.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, err
	}
	rate := float64(n) / time.Since(start).Seconds()
	_ = parallel(ctx, n, func(i int) error {
		return s.admin.CoreV1().PersistentVolumes().Delete(ctx, fmt.Sprintf("ceiling-%d", i), metav1.DeleteOptions{})
	})
	return rate, nil
}

// backlog: PVs/s and API writes per volume; cpu the provisioner's CPU time
// from its start to the last PV.
type backlog struct{ rate, writes, cpu float64 }

// measureBacklog isolates the provisioner from the rest of the system: the
// claims are created and annotated by kube-controller-manager while no
// provisioner runs, then one starts and works through them. The
// provisioner must be stopped; the one started here keeps running.
func measureBacklog(ctx context.Context, s *subject, n int) (*backlog, error) {
	admin := s.admin
	ns, err := framework.CreateNamespace(ctx, admin, "backlog")
	if err != nil {
		return nil, err
	}
	logf("backlog: creating %d claims with no provisioner running", n)
	if err := createClaims(ctx, admin, ns, s.class, "b", n); err != nil {
		return nil, err
	}
	if err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		annotated, err := countClaims(ctx, admin, ns, func(pvc *corev1.PersistentVolumeClaim) bool {
			return pvc.Annotations[framework.AnnStorageProvisioner] == s.b.ProvisionerName()
		})
		return annotated == n, err
	}); err != nil {
		return nil, err
	}
	before := s.api.snapshot()
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	profiled := s.profileCPU(ctx, "backlog")
	defer func() { <-profiled }()
	if err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		pvs, err := admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		created := 0
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
				created++
			}
		}
		return created == n, nil
	}); err != nil {
		return nil, err
	}
	b := &backlog{rate: float64(n) / time.Since(s.started).Seconds()}
	b.writes = writes(diff(s.api.snapshot(), before)) / float64(n)
	m, err := scrape(s.p)
	if err != nil {
		return nil, err
	}
	b.cpu = m.sum("process_cpu_seconds_total", nil)
	return b, nil
}

// workersStarted is the controller's log line at the end of its start-up.
const workersStarted = "Workers started"

type restart struct {
	ready, idle               time.Duration
	writes                    float64
	rssMB, heapMB, rssLaterMB float64
	// cpu is the CPU time the provisioner used until idle; load the
	// machine's one-minute load average then, and loadBefore just before
	// the start: on a machine shared with the API server, what the
	// start-up waited for.
	cpu, load, loadBefore float64
	// kcmPaused: kube-controller-manager was stopped from the start until
	// idle; kcmCPU is the CPU time it used meanwhile.
	kcmPaused bool
	kcmCPU    float64
	// apiserverCPU is the CPU time kube-apiserver used from the start until
	// idle: mostly sending the provisioner its objects; apiserverGCs its
	// garbage collections meanwhile, each marking its whole watch cache.
	apiserverCPU, apiserverGCs float64
	// benchCPU is this program's CPU time meanwhile: the counting proxy
	// passing the objects on, unless -restart-direct.
	benchCPU float64
}

// -restart-kcm values.
const (
	kcmRunning   = "running"
	kcmPaused    = "paused"
	kcmAlternate = "alternate"
)

// kcmState names kube-controller-manager's state during a restart.
func kcmState(paused bool) string {
	if paused {
		return kcmPaused
	}
	return kcmRunning
}

// settleTime is how long after idle the restarted provisioner's RSS is read
// again: what it keeps, not only what it holds right after start-up.
const settleTime = 30 * time.Second

// bindForRestart binds many claims for measureRestart and stops the
// provisioner. The first provisioned claims go through the provisioner and
// its storage; the rest are bound, while it is stopped, to copies of their
// PVs.
func bindForRestart(ctx context.Context, s *subject, claims, provisioned int) error {
	admin := s.admin
	ns, err := framework.CreateNamespace(ctx, admin, "restart")
	if err != nil {
		return err
	}
	logf("creating %d claims for the restart measurement", provisioned)
	if err := createClaims(ctx, admin, ns, s.class, "r", provisioned); err != nil {
		return err
	}
	if err := waitBound(ctx, admin, ns, provisioned); err != nil {
		return err
	}
	s.stop()
	if claims > provisioned {
		logf("binding %d more claims to copies of their PVs", claims-provisioned)
		if err := copyBoundClaims(ctx, admin, ns, s.class, provisioned, claims); err != nil {
			return err
		}
		if err := waitBound(ctx, admin, ns, claims); err != nil {
			return err
		}
	}
	return nil
}

// measureRestart (re)starts the provisioner and measures its start-up: it
// must write nothing.
func measureRestart(ctx context.Context, s *subject, profile, pauseKCM bool) (*restart, error) {
	logf("restarting the provisioner (kube-controller-manager %s)", kcmState(pauseKCM))
	var profiled chan struct{}
	before := s.api.snapshot()
	loadBefore := loadAverage()
	kcm := s.cp.ControllerManagerPID()
	kcmBefore := procCPUSeconds(kcm)
	apiserver := s.cp.APIServerPID()
	if apiserver == 0 {
		logf("kube-apiserver's process not found: its CPU row reads 0")
	}
	apiserverBefore := procCPUSeconds(apiserver)
	gcsBefore := apiserverGCCount(ctx, s.admin)
	benchBefore := procCPUSeconds(os.Getpid())
	directBefore := s.directWrites(ctx)
	resume := func() {}
	if pauseKCM {
		if err := syscall.Kill(kcm, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("pausing kube-controller-manager: %w", err)
		}
		resume = sync.OnceFunc(func() {
			if err := syscall.Kill(kcm, syscall.SIGCONT); err != nil {
				logf("resuming kube-controller-manager: %v", err)
			}
		})
		defer resume()
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	r := &restart{ready: time.Since(s.started), loadBefore: loadBefore, kcmPaused: pauseKCM}
	if profile {
		profiled = make(chan struct{})
		go func() {
			defer close(profiled)
			saveProfile(ctx, s, "cpu", "profile?seconds=15")
		}()
	}
	if err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		m, err := scrape(s.p)
		if err != nil {
			return false, err
		}
		// Idle is the start-up over (the journal read, which comes after
		// /readyz, and the workers started) with empty queues: bound claims
		// and volumes never enter them.
		if !s.p.HasLog(workersStarted) || m.sum("workqueue_depth", nil) != 0 || m.sum("workqueue_unfinished_work_seconds", nil) != 0 {
			return false, nil
		}
		r.idle = time.Since(s.started)
		r.writes = writes(diff(s.api.snapshot(), before))
		if s.direct {
			r.writes = s.directWrites(ctx) - directBefore
		}
		r.benchCPU = procCPUSeconds(os.Getpid()) - benchBefore
		r.heapMB = m.sum("go_memstats_heap_inuse_bytes", nil) / 1024 / 1024
		r.cpu = m.sum("process_cpu_seconds_total", nil)
		r.load = loadAverage()
		r.kcmCPU = procCPUSeconds(kcm) - kcmBefore
		r.apiserverCPU = procCPUSeconds(apiserver) - apiserverBefore
		r.apiserverGCs = apiserverGCCount(ctx, s.admin) - gcsBefore
		return true, nil
	}); err != nil {
		return nil, err
	}
	resume()
	r.rssMB = procStatusMB(s.p.Pid(), "VmRSS:")
	if profile {
		saveProfile(ctx, s, "heap", "heap")
		<-profiled
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settleTime):
	}
	r.rssLaterMB = procStatusMB(s.p.Pid(), "VmRSS:")
	return r, nil
}

// profileCPU saves a CPU profile of the provisioner's next
// -cpuprofile-for as <subject>-<phase>-cpu.pprof in -cpuprofile's
// directory, if set; the channel closes when it is saved.
func (s *subject) profileCPU(ctx context.Context, phase string) <-chan struct{} {
	done := make(chan struct{})
	if s.c.cpuProfileDir == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		path := filepath.Join(s.c.cpuProfileDir, fmt.Sprintf("%s-%s-cpu.pprof", s.name, phase))
		saveProfileTo(ctx, s, path, "cpu", fmt.Sprintf("profile?seconds=%d", max(1, int(s.c.cpuProfileFor.Seconds()))))
	}()
	return done
}

// saveProfile saves one of the running provisioner's pprof profiles as
// <kind>-<pid>.pprof in the run's directory; failures are only logged.
func saveProfile(ctx context.Context, s *subject, kind, query string) {
	saveProfileTo(ctx, s, filepath.Join(s.dir, fmt.Sprintf("%s-%d.pprof", kind, s.p.Pid())), kind, query)
}

// saveProfileTo saves one of the running provisioner's pprof profiles at
// path; failures are only logged.
func saveProfileTo(ctx context.Context, s *subject, path, kind, query string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.p.Endpoint+"/debug/pprof/"+query, nil)
	if err != nil {
		logf("%s profile: %v", kind, err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		logf("%s profile: %v", kind, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, data)
	}
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		logf("%s profile: %v", kind, err)
		return
	}
	logf("%s profile saved: %s", kind, path)
}

// waitBound waits until want claims in ns are Bound.
func waitBound(ctx context.Context, admin kubernetes.Interface, ns string, want int) error {
	return poll(ctx, 5*time.Second, func() (bool, error) {
		bound, err := countClaims(ctx, admin, ns, func(pvc *corev1.PersistentVolumeClaim) bool {
			return pvc.Status.Phase == corev1.ClaimBound
		})
		logf("%d/%d bound", bound, want)
		return bound == want, err
	})
}

// copyBoundClaims creates claims r-from..r-(to-1) of class in ns, each with
// a PV named, annotated and pre-bound as the provisioner would have made it,
// the rest of it copied from the PV of a provisioned claim: to a restart it
// is indistinguishable from a provisioned volume.
func copyBoundClaims(ctx context.Context, admin kubernetes.Interface, ns, class string, from, to int) error {
	pvs, err := admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var originals []corev1.PersistentVolume
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns && pv.Spec.StorageClassName == class {
			originals = append(originals, pv)
		}
	}
	if len(originals) == 0 {
		return fmt.Errorf("no provisioned PV in %s to copy", ns)
	}
	return parallel(ctx, to-from, func(i int) error {
		pvc, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, fmt.Sprintf("r-%d", from+i), class, "1Gi"), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		original := &originals[i%len(originals)]
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "pvc-" + string(pvc.UID),
				Labels:      original.Labels,
				Annotations: original.Annotations,
				Finalizers:  original.Finalizers,
			},
			Spec: *original.Spec.DeepCopy(),
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: pvc.Name, UID: pvc.UID}
		// A copy shares its original's asset, which the provisioners rightly
		// refuse to delete for it (the asset names another PV): should a copy
		// ever be released, it keeps the asset. A restart reads bound volumes
		// the same whatever their policy.
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		if pv, err = admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return err
		}
		return bindCopy(ctx, admin, pvc, pv)
	})
}

// bindCopy binds a claim and its copied PV as kube-controller-manager's
// binder would (its one worker binds a few dozen pairs per second here, an
// hour for 100,000): claim volumeName and bind-completed, then both phases
// Bound. Where the binder got there first, its work is kept.
func bindCopy(ctx context.Context, admin kubernetes.Interface, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if pvc.Spec.VolumeName == "" {
			pvc.Spec.VolumeName = pv.Name
			if pvc.Annotations == nil {
				pvc.Annotations = map[string]string{}
			}
			pvc.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
			updated, err := admin.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
			if err != nil {
				if fresh, gerr := admin.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{}); gerr == nil {
					pvc = fresh
				}
				return err
			}
			pvc = updated
		}
		if pv.Status.Phase != corev1.VolumeBound {
			pv.Status.Phase = corev1.VolumeBound
			updated, err := admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
			if err != nil {
				if fresh, gerr := admin.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); gerr == nil {
					pv = fresh
				}
				return err
			}
			pv = updated
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			pvc.Status.Phase = corev1.ClaimBound
			pvc.Status.AccessModes = pv.Spec.AccessModes
			pvc.Status.Capacity = pv.Spec.Capacity
			if _, err := admin.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				if fresh, gerr := admin.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{}); gerr == nil {
					pvc = fresh
				}
				return err
			}
		}
		return nil
	})
}

// createClaims creates n claims <prefix>-0.. of class in ns.
func createClaims(ctx context.Context, admin kubernetes.Interface, ns, class, prefix string, n int) error {
	return parallel(ctx, n, func(i int) error {
		pvc := framework.NewPVC(ns, fmt.Sprintf("%s-%d", prefix, i), class, "1Gi")
		_, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		return err
	})
}

// countClaims counts the claims in ns that match.
func countClaims(ctx context.Context, admin kubernetes.Interface, ns string, match func(*corev1.PersistentVolumeClaim) bool) (int, error) {
	list, err := admin.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if match(&list.Items[i]) {
			n++
		}
	}
	return n, nil
}

// poll calls done every interval until it reports true, fails, or ctx ends.
func poll(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) { return done() })
}

// quantiles are the p50, p90 and p99 of d, in milliseconds.
func quantiles(d []time.Duration) []string {
	if len(d) == 0 {
		return []string{"–", "–", "–"}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) string {
		i := int(p * float64(len(d)-1))
		return fmt.Sprintf("%.0f ms", float64(d[i].Microseconds())/1000)
	}
	return []string{at(0.5), at(0.9), at(0.99)}
}

// percentiles are the quantiles as three table cells.
func percentiles(d []time.Duration) string {
	return "| " + strings.Join(quantiles(d), " | ") + " |"
}

// requestTotals are the writes per provisioned and per deleted volume.
func (r *phase) requestTotals() (provWrites, delWrites float64) {
	return writes(r.provRequests) / float64(r.n), writes(r.delRequests) / float64(r.n)
}

func report(out io.Writer, h string, c config, r *phase, ceiling float64) {
	n := float64(r.n)
	fmt.Fprintf(out, "%s %d claims at once\n\n", h, r.n)
	fmt.Fprintf(out, "| stage | claims/s | p50 | p90 | p99 |\n|---|---|---|---|---|\n")
	fmt.Fprintf(out, "| PVC created → PV created (the provisioner) | %.1f %s\n", r.provisionRate, percentiles(r.toPV))
	fmt.Fprintf(out, "| ↳ PVC created → provisioner named on it (kube-controller-manager) | – %s\n", percentiles(r.toAnnotated))
	fmt.Fprintf(out, "| ↳ provisioner named → PV created (the provisioner's own part) | – %s\n", percentiles(r.fromAnnotated))
	fmt.Fprintf(out, "| PV created → PVC Bound (kube-controller-manager's binder) | %.1f %s\n", r.bindRate, percentiles(r.toBound))
	fmt.Fprintf(out, "| PVC created → PVC Bound (end to end) | – %s\n", percentiles(r.endToEnd))
	fmt.Fprintf(out, "| PVC deleted → PV gone (deletion) | %.1f %s\n", r.deleteRate, percentiles(r.delete))
	fmt.Fprintf(out, "\nRaw ceiling (a plain client at %g/%d creating %d PVs): **%.1f PVs/s**; the provisioner reaches **%.0f%%** of it.\n\n",
		c.qps, c.burst, r.n, ceiling, 100*r.provisionRate/ceiling)

	fmt.Fprintf(out, "| API requests by the provisioner | per provisioned volume | per deleted volume |\n|---|---|---|\n")
	keys := map[string]bool{}
	for k := range r.provRequests {
		keys[k] = true
	}
	for k := range r.delRequests {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		fmt.Fprintf(out, "| %s | %.3f | %.3f |\n", k, r.provRequests[k]/n, r.delRequests[k]/n)
	}
	provWrites, delWrites := r.requestTotals()
	fmt.Fprintf(out, "| **writes of the PV path** (main client: PVs, journal) | **%.3f** | **%.3f** |\n", writesBy(r.provRequests, "main")/n, writesBy(r.delRequests, "main")/n)
	fmt.Fprintf(out, "| writes of events (their own client and budget) | %.3f | %.3f |\n", writesBy(r.provRequests, "events")/n, writesBy(r.delRequests, "events")/n)
	fmt.Fprintf(out, "| all writes | %.3f | %.3f |\n\n", provWrites, delWrites)
	written := r.eventsWritten["single"] + r.eventsWritten["aggregated"] + r.eventsWritten["repeat"]
	fmt.Fprintf(out, "Events: %.0f emitted (%.0f warnings; %.0f failed provisioning attempts, retried), %.0f written (%.0f single, %.0f aggregated per namespace, %.0f count updates); journal writes: %.0f (%.3f per volume).\n\n",
		r.eventsEmitted, r.warnings, r.failedAttempts, written, r.eventsWritten["single"], r.eventsWritten["aggregated"], r.eventsWritten["repeat"], r.journalWrites, r.journalWrites/n)
	fmt.Fprintf(out, "Provisioner CPU: **%.2f s per 1000 provisioned volumes** (%.2f s from the first claim created until its events and journal settled).\n\n", 1000*r.cpu/n, r.cpu)
	fmt.Fprintf(out, "Provisioner memory: peak RSS %.1f MB (creation and deletion), heap in use after the burst %.1f MB.\n", r.peakRSSMB, r.heapMB)
	for _, p := range r.problems {
		fmt.Fprintf(out, "\n**Problem:** %s\n", p)
	}
}

// summary prints one row per provisioner: the burst, then the restart.
func summary(out io.Writer, c config, results []*result) {
	fmt.Fprintf(out, "## Summary\n\nAt --kube-api-qps=%g --kube-api-burst=%d --worker-threads=%d. "+
		"Latencies p50 / p90 / p99 from the claim's creation; writes are API writes by the provisioner per volume: the PV path (PVs and journal) + events.\n\n", c.qps, c.burst, c.workers)
	fmt.Fprintf(out, "| provisioner | claims | claims/s to Bound | PVC → PV created | PVC → Bound | writes per volume (PV path + events) | deletes/s | writes per deleted volume | peak RSS | heap after burst | raw ceiling |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.burst == nil {
			continue
		}
		b := r.burst
		_, delWrites := b.requestTotals()
		mark := ""
		if len(b.problems) > 0 {
			mark = " (assets disagree, see above)"
		}
		n := float64(b.n)
		fmt.Fprintf(out, "| %s%s | %d | %.1f | %s | %s | %.3f + %.3f | %.1f | %.3f | %.1f MB | %.1f MB | %.1f PVs/s |\n",
			r.name, mark, b.n, b.boundRate, strings.Join(quantiles(b.toPV), " / "), strings.Join(quantiles(b.endToEnd), " / "),
			writesBy(b.provRequests, "main")/n, writesBy(b.provRequests, "events")/n, b.deleteRate, delWrites, b.peakRSSMB, b.heapMB, r.ceiling)
	}
	fmt.Fprintf(out, "\n| provisioner | bound claims | start to ready | start to idle | API writes at start | RSS when idle | heap when idle | RSS %s later |\n|---|---|---|---|---|---|---|---|\n", settleTime)
	for _, r := range results {
		for _, x := range r.restarts {
			claims := strconv.Itoa(r.restartClaims)
			if r.provisioned < r.restartClaims {
				claims += fmt.Sprintf(" (%d provisioned, the rest copies)", r.provisioned)
			}
			fmt.Fprintf(out, "| %s | %s | %.2f s | %.2f s | %.0f | %.1f MB | %.1f MB | %.1f MB |\n",
				r.name, claims, x.ready.Seconds(), x.idle.Seconds(), x.writes, x.rssMB, x.heapMB, x.rssLaterMB)
		}
	}
}
