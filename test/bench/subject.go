// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/backend/all"
	"github.com/kubeprov/external-storage/test/framework"
)

// libName is the subject that measures the library's controller alone.
const libName = "lib"

// errAssetsInMemory: the lib subject's volumes exist only inside its process.
var errAssetsInMemory = errors.New("the in-memory provisioner's assets cannot be listed")

// libBackend is the library's controller with nothing behind it:
// test/cmd/faultprovisioner with its in-memory provisioner, so that its
// numbers are the controller's own, not a storage system's.
type libBackend struct {
	cfg      backend.Config
	replicas *backend.Replicas
}

// slowPrefix names the claims the lib subject's provisioner answers "in
// background" for c.inflightHold (measureInFlight).
const slowPrefix = "slow-"

func newLibBackend(cfg backend.Config, hold time.Duration) *libBackend {
	return &libBackend{cfg: cfg, replicas: backend.NewReplicas(cfg, backend.Binary{Module: "test", Name: "faultprovisioner"},
		"--noop", "--provisioner="+cfg.ProvisionerName, "--in-background-prefix="+slowPrefix, "--in-background-for="+hold.String())}
}

func (l *libBackend) Name() string                  { return libName }
func (l *libBackend) ProvisionerName() string       { return l.cfg.ProvisionerName }
func (l *libBackend) Parameters() map[string]string { return nil }
func (l *libBackend) StartProvisioner(ctx context.Context, identity string, leaderElection bool) (*framework.Process, error) {
	return l.replicas.Start(ctx, backend.Replica{Identity: identity, LeaderElection: leaderElection})
}
func (l *libBackend) Assets(context.Context) ([]string, error) { return nil, errAssetsInMemory }
func (l *libBackend) AssetOf(*corev1.PersistentVolume) string  { return "" }
func (l *libBackend) Close() error                             { return nil }
func (l *libBackend) Outage(context.Context) (func(context.Context) error, error) {
	return nil, backend.ErrNoOutage
}

// subject is one provisioner under test on a control plane of its own (so
// that no provisioner's leftovers weigh on the next one's informers): its
// backend, the replica running now, and the proxy counting its requests.
type subject struct {
	name  string
	c     config
	cp    *framework.ControlPlane
	admin kubernetes.Interface
	api   *apiCounter
	b     backend.Backend
	class string
	dir   string
	home  string // the provisioner's namespace: its journal

	p       *framework.Process // the replica running now, if any
	started time.Time          // when p was started
	// direct: replicas started now connect to kube-apiserver without the
	// counting proxy (connectDirectly).
	direct bool
}

// newSubject starts a control plane, the request counter and the backend
// called name.
func newSubject(ctx context.Context, name string, c config) (_ *subject, retErr error) {
	s := &subject{name: name, c: c}
	defer func() {
		if retErr != nil {
			s.close()
		}
	}()
	var err error
	if s.dir, err = os.MkdirTemp("", "bench-"+name+"-"); err != nil {
		return nil, err
	}
	s.cp, err = framework.Start(ctx, framework.Options{
		ControllerManagerArgs: []string{
			fmt.Sprintf("--kube-api-qps=%d", c.kcmQPS), fmt.Sprintf("--kube-api-burst=%d", 2*c.kcmQPS),
			// kube-controller-manager's own default, not the tests' 1 s: with
			// 100,000 bound claims a resync every second keeps a core busy
			// with what no cluster does, and the restart would measure that.
			"--pvclaimbinder-sync-period=15s",
		},
		Log: logf,
	})
	if err != nil {
		return nil, err
	}
	cfg := s.cp.RestConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	s.admin = kubernetes.NewForConfigOrDie(cfg)
	if s.api, err = newAPICounter(s.cp, s.dir, c.proxyH2); err != nil {
		return nil, err
	}
	ns, err := framework.CreateNamespace(ctx, s.admin, "bench-provisioner")
	if err != nil {
		return nil, err
	}
	s.home = ns
	bcfg := backend.Config{
		ControlPlane: s.cp,
		Namespace:    ns,
		Dir:          s.dir,
		// After the backend's own flags, so these win.
		ExtraArgs: []string{
			"--kubeconfig=" + s.api.Kubeconfig,
			fmt.Sprintf("--kube-api-qps=%g", c.qps), fmt.Sprintf("--kube-api-burst=%d", c.burst),
			fmt.Sprintf("--worker-threads=%d", c.workers),
		},
		Log: logf,
	}
	if c.profiling() {
		bcfg.ExtraArgs = append(bcfg.ExtraArgs, "--enable-pprof")
	}
	s.class = "bench"
	if name == libName {
		bcfg.ProvisionerName = "bench.kubeprov.io/noop"
		s.b = newLibBackend(bcfg, c.inflightHold)
	} else {
		s.class = "bench-" + name
		bcfg.ProvisionerName = "bench.kubeprov.io-" + name
		if s.b, err = all.New(ctx, name, bcfg); err != nil {
			return nil, fmt.Errorf("the %s backend: %w", name, err)
		}
	}
	sc := framework.NewStorageClass(s.class, s.b.ProvisionerName(), s.b.Parameters())
	if _, err := s.admin.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return s, nil
}

// start runs a replica of the provisioner, after stopping the one running
// (two active replicas would share the work), and waits until it is ready.
func (s *subject) start(ctx context.Context) error {
	s.stop()
	s.started = time.Now()
	p, err := s.b.StartProvisioner(ctx, "bench", false)
	if err != nil {
		return err
	}
	s.p = p
	logf("%s provisioner pid %d, log %s", s.name, p.Pid(), p.LogPath)
	return nil
}

// connectDirectly points the provisioner's kubeconfig at kube-apiserver
// itself, with the admin's credentials, for the replicas started from now
// on: their requests no longer pass the counting proxy.
func (s *subject) connectDirectly() error {
	data, err := os.ReadFile(s.cp.KubeconfigPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.api.Kubeconfig, data, 0o600); err != nil {
		return err
	}
	s.direct = true
	logf("the provisioner now talks to kube-apiserver directly; writes are counted from its apiserver_request_total")
	return nil
}

// directWrites is kube-apiserver's count of mutating requests so far,
// from every client, except on Leases (kube-apiserver's own renew theirs):
// the writes of a provisioner connected directly while nothing else writes.
func (s *subject) directWrites(ctx context.Context) float64 {
	if !s.direct {
		return 0
	}
	data, err := s.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		logf("kube-apiserver's request counts: %v", err)
		return 0
	}
	m, err := parseMetrics(bytes.NewReader(data))
	if err != nil {
		logf("kube-apiserver's request counts: %v", err)
		return 0
	}
	total := 0.0
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"} {
		total += m.sum("apiserver_request_total", map[string]string{"verb": verb}) -
			m.sum("apiserver_request_total", map[string]string{"verb": verb, "resource": "leases"})
	}
	return total
}

// stop stops the running replica, gracefully: that writes the journal's
// pending removals.
func (s *subject) stop() {
	if s.p == nil {
		return
	}
	if err := s.p.Stop(); err != nil {
		logf("%s provisioner: %v", s.name, err)
	}
	s.p = nil
}

// close stops everything newSubject started; the scratch directory (logs,
// volumes) stays when the run failed.
func (s *subject) close() {
	s.stop()
	if s.b != nil {
		if err := s.b.Close(); err != nil {
			logf("stopping the %s backend: %v", s.name, err)
		}
	}
	if s.api != nil {
		_ = s.api.Close()
	}
	if s.cp != nil {
		_ = s.cp.Stop()
	}
}

// checkAssets compares the backend's assets with the class's PVs, if the
// backend can list them; what it finds wrong is reported with the numbers.
func (s *subject) checkAssets(ctx context.Context, when string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := backend.WaitForAssets(ctx, s.b, s.admin, s.class)
	if err == nil || errors.Is(err, errAssetsInMemory) {
		return ""
	}
	logf("%s: %s: %v", s.name, when, err)
	return fmt.Sprintf("%s, assets and PVs disagree: %v", when, err)
}
