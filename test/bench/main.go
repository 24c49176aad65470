// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench measures the ProvisionController against the real control
// plane and prints the results as Markdown: claims/s and latency percentiles
// for each stage, API requests per volume, events written versus emitted,
// memory, deletion, the raw API ceiling at the same client settings, and a
// restart with many bound claims. The controller runs as a separate process
// (test/cmd/faultprovisioner with an in-memory provisioner), exactly as
// users run a provisioner; every request it makes is counted.
//
//	go run ./bench -n 1000 -qps 200 -burst 400
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
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
	"k8s.io/client-go/tools/cache"

	"github.com/kubeprov/external-storage/test/framework"
)

const provisionerName = "bench.kubeprov.io/noop"

type config struct {
	n, burst, workers, restartClaims, kcmQPS int
	qps                                      float64
	timeout                                  time.Duration
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 1000, "claims created at once")
	flag.Float64Var(&c.qps, "qps", 200, "controller --kube-api-qps")
	flag.IntVar(&c.burst, "burst", 400, "controller --kube-api-burst")
	flag.IntVar(&c.workers, "workers", 100, "controller --worker-threads")
	flag.IntVar(&c.restartClaims, "restart-claims", 10000, "bound claims for the restart measurement; 0 skips it")
	flag.IntVar(&c.kcmQPS, "kcm-qps", 2000, "kube-controller-manager QPS, high so that its binder does not mask the provisioner")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "bound of the whole run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	err := run(ctx, c, os.Stdout)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, c config, out io.Writer) error {
	cp, err := framework.Start(ctx, framework.Options{
		ControllerManagerArgs: []string{fmt.Sprintf("--kube-api-qps=%d", c.kcmQPS), fmt.Sprintf("--kube-api-burst=%d", 2*c.kcmQPS)},
		Log:                   logf,
	})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	admin := kubernetes.NewForConfigOrDie(cfg)

	bin, err := buildProvisioner(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(bin)) }()
	p, err := startProvisioner(ctx, bin, cp.KubeconfigPath, c)
	if err != nil {
		return err
	}
	defer p.stop()

	class := framework.NewStorageClass("bench", provisionerName, nil)
	if _, err := admin.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(out, "# Provisioning benchmark\n\n%s\n\n", machine(c))

	if c.n > 0 {
		prov, err := measureBurst(ctx, admin, p, c.n, "burst")
		if err != nil {
			return err
		}
		ceiling, err := rawCeiling(ctx, cp, admin, c)
		if err != nil {
			return err
		}
		report(out, c, prov, ceiling)
		p.stop()
		alone, err := measureBacklog(ctx, admin, bin, cp.KubeconfigPath, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nThe provisioner alone: with %d annotated claims already waiting, a freshly started provisioner created their PVs at **%.1f PVs/s** "+
			"(from process start to the last PV; %.0f%% of the raw ceiling), with %.3f API writes per volume.\n", c.n, alone.rate, 100*alone.rate/ceiling, alone.writes)
		if p, err = startProvisioner(ctx, bin, cp.KubeconfigPath, c); err != nil {
			return err
		}
		defer p.stop()
	}

	if c.restartClaims > 0 {
		r, err := measureRestart(ctx, admin, p, bin, cp.KubeconfigPath, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n## Restart with %d bound claims\n\n| measure | value |\n|---|---|\n", c.restartClaims)
		fmt.Fprintf(out, "| time from start to ready (/readyz) | %.2f s |\n", r.ready.Seconds())
		fmt.Fprintf(out, "| time from start to idle (work queues empty) | %.2f s |\n", r.idle.Seconds())
		fmt.Fprintf(out, "| API writes during start-up | %.0f |\n", r.writes)
		fmt.Fprintf(out, "| RSS when idle | %.1f MB |\n", r.rssMB)
		fmt.Fprintf(out, "| heap in use when idle | %.1f MB |\n", r.heapMB)
	}
	return nil
}

// machine describes where the numbers come from.
func machine(c config) string {
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
		"Provisioner: test/cmd/faultprovisioner (lib's controller with an in-memory provisioner) at --kube-api-qps=%g "+
		"--kube-api-burst=%d --worker-threads=%d; events through their own client with the same limits.",
		runtime.NumCPU(), model, mem, runtime.Version(), c.kcmQPS, c.qps, c.burst, c.workers)
}

func buildProvisioner(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "bench")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "faultprovisioner")
	logf("building the provisioner")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/faultprovisioner")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return bin, cmd.Run()
}

type provisioner struct {
	cmd      *exec.Cmd
	endpoint string
	started  time.Time
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func startProvisioner(ctx context.Context, bin, kubeconfig string, c config) (*provisioner, error) {
	addr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--noop", "--kubeconfig", kubeconfig, "--provisioner", provisionerName,
		"--http-endpoint", addr, "--leader-election-namespace=default",
		fmt.Sprintf("--kube-api-qps=%g", c.qps), fmt.Sprintf("--kube-api-burst=%d", c.burst),
		fmt.Sprintf("--worker-threads=%d", c.workers))
	logFile, err := os.CreateTemp("", "bench-provisioner-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p := &provisioner{cmd: cmd, endpoint: "http://" + addr, started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	logf("provisioner pid %d, log %s", cmd.Process.Pid, logFile.Name())
	return p, p.waitReady(ctx)
}

func (p *provisioner) waitReady(ctx context.Context) error {
	for {
		resp, err := http.Get(p.endpoint + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("provisioner not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *provisioner) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// peakRSSMB is the process's high-water mark of resident memory.
func (p *provisioner) peakRSSMB() float64 { return procStatusMB(p.cmd.Process.Pid, "VmHWM:") }

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

// metrics is one scrape of the provisioner's /metrics.
type metrics map[string]*dto.MetricFamily

func (p *provisioner) scrape() (metrics, error) {
	resp, err := http.Get(p.endpoint + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
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

// requests returns the controller's request counts by "client verb resource".
func (m metrics) requests() map[string]float64 {
	out := map[string]float64{}
	if f := m["test_client_requests_total"]; f != nil {
		for _, metric := range f.Metric {
			labels := map[string]string{}
			for _, l := range metric.Label {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["client"]+" "+labels["verb"]+" "+labels["resource"]] += metric.Counter.GetValue()
		}
	}
	return out
}

// writes is the number of API writes the provisioner made.
func (m metrics) writes() float64 {
	total := 0.0
	for k, v := range m.requests() {
		if isWrite(k) {
			total += v
		}
	}
	return total
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func isWrite(key string) bool {
	verb := strings.Fields(key)[1]
	return verb == "post" || verb == "put" || verb == "patch" || verb == "delete"
}

// phase is what one burst measured.
type phase struct {
	n                               int
	toPV, toBound, endToEnd, delete []time.Duration
	provisionRate, bindRate         float64
	deleteRate                      float64
	provRequests, delRequests       map[string]float64
	eventsEmitted                   float64
	eventsWritten                   map[string]float64
	journalWrites                   float64
	peakRSSMB, heapMB               float64
}

// measureBurst creates n claims at once, waits for all to bind, then deletes them all.
func measureBurst(ctx context.Context, admin kubernetes.Interface, p *provisioner, n int, prefix string) (*phase, error) {
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

	before, err := p.scrape()
	if err != nil {
		return nil, err
	}
	logf("creating %d claims", n)
	if err := parallel(ctx, n, func(i int) error {
		pvc := framework.NewPVC(ns, fmt.Sprintf("%s-%d", prefix, i), "bench", "1Gi")
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
	afterProv, err := p.scrape()
	if err != nil {
		return nil, err
	}
	res := &phase{n: n, peakRSSMB: p.peakRSSMB()}
	res.provRequests = diff(afterProv.requests(), before.requests())
	res.eventsEmitted = afterProv.sum("controller_events_emitted_total", nil) - before.sum("controller_events_emitted_total", nil)
	res.eventsWritten = map[string]float64{}
	for _, kind := range []string{"single", "aggregated", "repeat"} {
		res.eventsWritten[kind] = afterProv.sum("controller_events_written_total", map[string]string{"kind": kind}) -
			before.sum("controller_events_written_total", map[string]string{"kind": kind})
	}
	res.journalWrites = afterProv.sum("controller_journal_writes_total", nil) - before.sum("controller_journal_writes_total", nil)
	res.heapMB = afterProv.sum("go_memstats_heap_inuse_bytes", nil) / 1024 / 1024
	res.toPV, res.toBound, res.endToEnd, res.provisionRate, res.bindRate = rec.provisionStats()

	logf("deleting %d claims", n)
	// Let the last events flush and the journal settle before counting deletion.
	time.Sleep(6 * time.Second)
	beforeDel, err := p.scrape()
	if err != nil {
		return nil, err
	}
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
	afterDel, err := p.scrape()
	if err != nil {
		return nil, err
	}
	res.delRequests = diff(afterDel.requests(), beforeDel.requests())
	res.delete, res.deleteRate = rec.deleteStats()
	return res, nil
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
// creates PVs: the upper bound for any provisioner with those settings.
func rawCeiling(ctx context.Context, cp *framework.ControlPlane, admin kubernetes.Interface, c config) (float64, error) {
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	plain := kubernetes.NewForConfigOrDie(cfg)
	logf("raw ceiling: %d PVs from a client at %g/%d", c.n, c.qps, c.burst)
	start := time.Now()
	if err := parallel(ctx, c.n, func(i int) error {
		pv := framework.NewPV(fmt.Sprintf("ceiling-%d", i), "bench-ceiling", "1Gi")
		_, err := plain.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, err
	}
	rate := float64(c.n) / time.Since(start).Seconds()
	_ = parallel(ctx, c.n, func(i int) error {
		return admin.CoreV1().PersistentVolumes().Delete(ctx, fmt.Sprintf("ceiling-%d", i), metav1.DeleteOptions{})
	})
	return rate, nil
}

type backlog struct{ rate, writes float64 }

// measureBacklog isolates the provisioner from the rest of the system: the
// claims are created and annotated by kube-controller-manager while no
// provisioner runs, then one starts and works through them.
func measureBacklog(ctx context.Context, admin kubernetes.Interface, bin, kubeconfig string, c config) (*backlog, error) {
	ns, err := framework.CreateNamespace(ctx, admin, "backlog")
	if err != nil {
		return nil, err
	}
	logf("backlog: creating %d claims with no provisioner running", c.n)
	if err := createClaims(ctx, admin, ns, "b", c.n); err != nil {
		return nil, err
	}
	if err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		annotated, err := countClaims(ctx, admin, ns, func(pvc *corev1.PersistentVolumeClaim) bool {
			return pvc.Annotations[framework.AnnStorageProvisioner] == provisionerName
		})
		return annotated == c.n, err
	}); err != nil {
		return nil, err
	}
	q, err := startProvisioner(ctx, bin, kubeconfig, c)
	if err != nil {
		return nil, err
	}
	defer q.stop()
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
		return created == c.n, nil
	}); err != nil {
		return nil, err
	}
	b := &backlog{rate: float64(c.n) / time.Since(q.started).Seconds()}
	m, err := q.scrape()
	if err != nil {
		return nil, err
	}
	b.writes = m.writes() / float64(c.n)
	return b, nil
}

type restart struct {
	ready, idle   time.Duration
	writes        float64
	rssMB, heapMB float64
}

// measureRestart binds many claims, restarts the provisioner and measures
// its start-up: it must write nothing.
func measureRestart(ctx context.Context, admin kubernetes.Interface, p *provisioner, bin, kubeconfig string, c config) (*restart, error) {
	ns, err := framework.CreateNamespace(ctx, admin, "restart")
	if err != nil {
		return nil, err
	}
	logf("creating %d claims for the restart measurement", c.restartClaims)
	if err := createClaims(ctx, admin, ns, "r", c.restartClaims); err != nil {
		return nil, err
	}
	if err := poll(ctx, 5*time.Second, func() (bool, error) {
		bound, err := countClaims(ctx, admin, ns, func(pvc *corev1.PersistentVolumeClaim) bool {
			return pvc.Status.Phase == corev1.ClaimBound
		})
		logf("%d/%d bound", bound, c.restartClaims)
		return bound == c.restartClaims, err
	}); err != nil {
		return nil, err
	}
	p.stop() // a graceful stop writes the journal's pending removals
	logf("restarting the provisioner")
	q, err := startProvisioner(ctx, bin, kubeconfig, c)
	if err != nil {
		return nil, err
	}
	defer q.stop()
	r := &restart{ready: time.Since(q.started)}
	if err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		m, err := q.scrape()
		if err != nil {
			return false, err
		}
		// Bound claims and volumes never enter the work queues, so idle is
		// ready with empty queues.
		if m.sum("workqueue_depth", nil) != 0 || m.sum("workqueue_unfinished_work_seconds", nil) != 0 {
			return false, nil
		}
		r.idle = time.Since(q.started)
		r.writes = m.writes()
		r.heapMB = m.sum("go_memstats_heap_inuse_bytes", nil) / 1024 / 1024
		return true, nil
	}); err != nil {
		return nil, err
	}
	r.rssMB = procStatusMB(q.cmd.Process.Pid, "VmRSS:")
	return r, nil
}

// createClaims creates n claims <prefix>-0.. of the bench class in ns.
func createClaims(ctx context.Context, admin kubernetes.Interface, ns, prefix string, n int) error {
	return parallel(ctx, n, func(i int) error {
		pvc := framework.NewPVC(ns, fmt.Sprintf("%s-%d", prefix, i), "bench", "1Gi")
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

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "| – | – | – |"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) string {
		i := int(p * float64(len(d)-1))
		return fmt.Sprintf("%.0f ms", float64(d[i].Microseconds())/1000)
	}
	return fmt.Sprintf("| %s | %s | %s |", at(0.5), at(0.9), at(0.99))
}

func report(out io.Writer, c config, r *phase, ceiling float64) {
	n := float64(r.n)
	fmt.Fprintf(out, "## %d claims at once\n\n", r.n)
	fmt.Fprintf(out, "| stage | claims/s | p50 | p90 | p99 |\n|---|---|---|---|---|\n")
	fmt.Fprintf(out, "| PVC created → PV created (the provisioner) | %.1f %s\n", r.provisionRate, percentiles(r.toPV))
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
	provWrites, delWrites := 0.0, 0.0
	for _, k := range sorted {
		fmt.Fprintf(out, "| %s | %.3f | %.3f |\n", k, r.provRequests[k]/n, r.delRequests[k]/n)
		if isWrite(k) {
			provWrites += r.provRequests[k]
			delWrites += r.delRequests[k]
		}
	}
	fmt.Fprintf(out, "| **all writes** | **%.3f** | **%.3f** |\n\n", provWrites/n, delWrites/n)
	written := r.eventsWritten["single"] + r.eventsWritten["aggregated"] + r.eventsWritten["repeat"]
	fmt.Fprintf(out, "Events: %.0f emitted, %.0f written (%.0f single, %.0f aggregated on the StorageClass, %.0f count updates); journal writes: %.0f (%.3f per volume).\n\n",
		r.eventsEmitted, written, r.eventsWritten["single"], r.eventsWritten["aggregated"], r.eventsWritten["repeat"], r.journalWrites, r.journalWrites/n)
	fmt.Fprintf(out, "Provisioner memory: peak RSS %.1f MB, heap in use after the burst %.1f MB.\n", r.peakRSSMB, r.heapMB)
}
