// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

// The budget benchmark (-budget N): hostpath-provisioner as its node-local
// DaemonSet runs, one instance per node, on budgetNodes nodes of two paths
// each, and a burst of N claims spread over the nodes as the scheduler
// would spread them (the selected-node annotation set at creation). Run
// once with a pathCapacity on every path and once without (the budget is
// then the filesystem's size, measured with statfs per claim), it prints
// claims/s, latency and API writes per volume of each, so that what the
// accounting costs is visible; it reads the PVs from the informer cache
// and should add no API request.
const (
	budgetNodes = 4
	budgetClass = "bench-budget"
	budgetName  = "bench.kubeprov.io-budget"
)

// budgetRun is one mode's numbers.
type budgetRun struct {
	mode           string
	n              int
	stats          provisionStats
	writes         float64
	writesByClient map[string]float64
	rssMB          float64
}

// runBudget measures both modes and prints their table.
func runBudget(ctx context.Context, c config, n int, out io.Writer) error {
	fmt.Fprintf(out, "# Budget benchmark\n\n%s\n\n", machineWith(c, fmt.Sprintf("hostpath-provisioner --node-local, %d instances, on one control plane per mode", budgetNodes)))
	var runs []budgetRun
	for _, budgets := range []bool{true, false} {
		r, err := measureBudget(ctx, c, n, budgets)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	fmt.Fprintf(out, "%d claims of 1Gi over %d node-local instances of 2 paths each, WaitForFirstConsumer, the nodes selected round-robin.\n\n", n, budgetNodes)
	fmt.Fprintln(out, "| mode | claims | bound claims/s | end-to-end p50 / p99 | API writes per volume | of which events | peak RSS, all instances |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range runs {
		q := quantiles(r.stats.endToEnd)
		fmt.Fprintf(out, "| %s | %d | %.1f | %s / %s | %.3f | %.3f | %.1f MB |\n", r.mode, r.n, r.stats.boundRate, q[0], q[2],
			r.writes/float64(r.n), r.writesByClient["events"]/float64(r.n), r.rssMB)
	}
	return nil
}

// measureBudget runs one mode on a control plane of its own.
func measureBudget(ctx context.Context, c config, n int, budgets bool) (budgetRun, error) {
	r := budgetRun{mode: "pathCapacity on every path", n: n}
	if !budgets {
		r.mode = "no pathCapacity (filesystem size)"
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "bench-budget-")
	if err != nil {
		return r, err
	}
	cp, err := framework.Start(ctx, framework.Options{
		ControllerManagerArgs: []string{fmt.Sprintf("--kube-api-qps=%d", c.kcmQPS), fmt.Sprintf("--kube-api-burst=%d", 2*c.kcmQPS)},
		Log:                   logf,
	})
	if err != nil {
		return r, err
	}
	defer func() { _ = cp.Stop() }()
	api, err := newAPICounter(cp, dir, c.proxyH2)
	if err != nil {
		return r, err
	}
	defer func() { _ = api.Close() }()
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	admin := kubernetes.NewForConfigOrDie(cfg)
	procs, err := startBudgetInstances(ctx, c, admin, api, dir, budgets)
	for _, p := range procs {
		defer func() { _ = p.Stop() }()
	}
	if err != nil {
		return r, err
	}
	class := framework.NewStorageClass(budgetClass, budgetName, nil)
	class.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	if _, err := admin.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	before := api.snapshot()
	if r.stats, err = budgetBurst(ctx, admin, n); err != nil {
		return r, err
	}
	// The journals' lazy removals and the last events, as measureBurst waits.
	time.Sleep(6 * time.Second)
	requests := diff(api.snapshot(), before)
	r.writes = writes(requests)
	r.writesByClient = map[string]float64{"events": writesBy(requests, "events")}
	for _, p := range procs {
		r.rssMB += peakRSSMB(p)
	}
	logf("budget %s: %.1f claims/s, %.3f writes per volume", r.mode, r.stats.boundRate, r.writes/float64(n))
	return r, nil
}

// startBudgetInstances runs one node-local hostpath-provisioner per node,
// each with its own config.json of two paths, through the counting proxy.
func startBudgetInstances(ctx context.Context, c config, admin kubernetes.Interface, api *apiCounter, dir string, budgets bool) ([]*framework.Process, error) {
	bin, err := framework.BuildBinary(ctx, "hostpath", "hostpath-provisioner")
	if err != nil {
		return nil, err
	}
	ns, err := framework.CreateNamespace(ctx, admin, "bench-provisioner")
	if err != nil {
		return nil, err
	}
	var procs []*framework.Process
	for i := range budgetNodes {
		node := fmt.Sprintf("bench-node-%d", i)
		config, err := budgetConfig(filepath.Join(dir, node), node, budgets)
		if err != nil {
			return procs, err
		}
		p, err := framework.StartProcess(ctx, framework.ProcessOptions{
			Binary: bin,
			Args: []string{"--kubeconfig=" + api.Kubeconfig, "--provisioner=" + budgetName, "--node-local", "--node-name=" + node, "--config=" + config,
				fmt.Sprintf("--kube-api-qps=%g", c.qps), fmt.Sprintf("--kube-api-burst=%d", c.burst), fmt.Sprintf("--worker-threads=%d", c.workers)},
			Env:     []string{"POD_NAMESPACE=" + ns},
			LogPath: filepath.Join(dir, node+".log"),
		})
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// budgetConfig writes a node's config.json: paths a and b under dir, each
// with room for all the claims when budgets, else none given.
func budgetConfig(dir, node string, budgets bool) (string, error) {
	paths := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	}
	entry := fmt.Sprintf(`{"node":%q,"paths":[%q,%q]`, node, paths[0], paths[1])
	if budgets {
		entry += fmt.Sprintf(`,"pathCapacity":{%q:"100Ti",%q:"100Ti"}`, paths[0], paths[1])
	}
	file := filepath.Join(dir, "config.json")
	return file, os.WriteFile(file, []byte(`{"nodePathMap":[`+entry+`}]}`), 0o600)
}

// budgetBurst creates n claims at once, each with its node selected, and
// waits until all are bound.
func budgetBurst(ctx context.Context, admin kubernetes.Interface, n int) (provisionStats, error) {
	ns, err := framework.CreateNamespace(ctx, admin, "budget")
	if err != nil {
		return provisionStats{}, err
	}
	rec := newRecorder(ns)
	factory := informers.NewSharedInformerFactory(admin, 0)
	_, _ = factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { rec.claimSeen(obj.(*corev1.PersistentVolumeClaim)) },
		AddFunc:    func(obj any) { rec.claimSeen(obj.(*corev1.PersistentVolumeClaim)) },
	})
	_, _ = factory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { rec.volumeAdded(obj.(*corev1.PersistentVolume)) },
	})
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	logf("creating %d claims over %d nodes", n, budgetNodes)
	if err := parallel(ctx, n, func(i int) error {
		pvc := framework.NewPVC(ns, fmt.Sprintf("b-%d", i), budgetClass, "1Gi")
		pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": fmt.Sprintf("bench-node-%d", i%budgetNodes)}
		t := time.Now()
		created, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err == nil {
			rec.claimCreated(created.UID, t)
		}
		return err
	}); err != nil {
		return provisionStats{}, err
	}
	if err := rec.waitBound(ctx, n); err != nil {
		return provisionStats{}, fmt.Errorf("%w (the instances' logs: bench-node-*.log in the run's directory)", err)
	}
	return rec.provisionStats(), nil
}
