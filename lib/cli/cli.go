// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cli is the plumbing every provisioner binary shares: the flag
// family CSI sidecar users know, environment overrides, Kubernetes clients,
// leader election, and the HTTP endpoint for metrics and health.
package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
	"github.com/kubeprov/external-storage/lib/version"
)

// Defaults of the shared flags.
const (
	DefaultKubeAPIQPS    = 5
	DefaultKubeAPIBurst  = 10
	DefaultWorkerThreads = controller.DefaultThreadiness
	DefaultTimeout       = controller.DefaultOperationTimeout
	shutdownGrace        = 5 * time.Second
	// LeaderElectionCheck names the liveness check of leader election,
	// served alone at /healthz/leader-election as by the CSI sidecars.
	LeaderElectionCheck = "leader-election"
)

// Common holds the flags every provisioner binary has.
type Common struct {
	// Provisioner is --provisioner, the name StorageClasses give in their
	// provisioner field. Binaries whose name comes from elsewhere
	// (csi-provisioner: the CSI driver's) have no such flag.
	Provisioner string
	// Identity is --identity: what this instance records on the PVs it
	// provisions, and deletes only PVs recorded with. Only binaries that set
	// IdentityDefault have the flag; Complete fills the default in.
	Identity string
	// IdentityDefault describes, in --identity's help, the identity used
	// when the flag is empty; "" means the binary has no --identity.
	IdentityDefault string
	// provisionerFlag: the binary has --provisioner.
	provisionerFlag bool

	Kubeconfig              string
	Master                  string // the API server's address; overrides the kubeconfig's
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	LeaseLabels             map[string]string // put on the leader Lease
	HTTPEndpoint            string
	// MetricsAddress is the CSI sidecars' deprecated name of HTTPEndpoint;
	// at most one of the two may be set.
	MetricsAddress     string
	EnablePprof        bool // serve Go's profiles under /debug/pprof/ on the endpoint
	MetricsPath        string
	KubeAPIQPS         float32
	KubeAPIBurst       int
	WorkerThreads      int
	Timeout            time.Duration
	RetryIntervalStart time.Duration
	RetryIntervalMax   time.Duration
}

// NewCommon returns the shared options with their defaults; provisioner is
// the default of --provisioner, "" for a binary without that flag.
func NewCommon(provisioner string) Common {
	return Common{
		Provisioner:        provisioner,
		provisionerFlag:    provisioner != "",
		LeaseDuration:      controller.DefaultLeaseDuration,
		RenewDeadline:      controller.DefaultRenewDeadline,
		RetryPeriod:        controller.DefaultRetryPeriod,
		MetricsPath:        httpendpoint.DefaultMetricsPath,
		KubeAPIQPS:         DefaultKubeAPIQPS,
		KubeAPIBurst:       DefaultKubeAPIBurst,
		WorkerThreads:      DefaultWorkerThreads,
		Timeout:            DefaultTimeout,
		RetryIntervalStart: controller.DefaultRetryIntervalStart,
		RetryIntervalMax:   controller.DefaultRetryIntervalMax,
	}
}

// AddFlags adds the shared flags to fs.
func (o *Common) AddFlags(fs *pflag.FlagSet) {
	if o.provisionerFlag {
		fs.StringVar(&o.Provisioner, "provisioner", o.Provisioner, "Provisioner name that StorageClasses give in their provisioner field.")
	}
	if o.IdentityDefault != "" {
		fs.StringVar(&o.Identity, "identity", o.Identity,
			"Identity recorded on the PVs this instance provisions; it deletes only PVs of its own identity. Empty means "+o.IdentityDefault+".")
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file; empty means in-cluster configuration.")
	fs.StringVar(&o.Master, "master", o.Master, "Address of the API server; overrides the server of --kubeconfig (or of the in-cluster configuration).")
	fs.BoolVar(&o.LeaderElection, "leader-election", o.LeaderElection, "Elect one active replica through a Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader Lease and of the in-flight journal; empty means the pod's namespace (or default out of cluster).")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "How long standby replicas wait before taking over.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "How long the leader retries renewing before it gives up.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "How often replicas try to acquire or renew the Lease.")
	fs.Var(newLabelsValue(&o.LeaseLabels), "leader-election-labels",
		"Labels on the leader Lease, as comma-separated key:value pairs (my-label:my-value,other:value).")
	fs.StringVar(&o.HTTPEndpoint, "http-endpoint", o.HTTPEndpoint, "Address (host:port) serving metrics, /healthz (and /healthz/leader-election), /readyz, and with --enable-pprof /debug/pprof/; empty disables it.")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress,
		"Deprecated: use --http-endpoint, which this sets under its old name. At most one of the two may be set.")
	fs.BoolVar(&o.EnablePprof, "enable-pprof", o.EnablePprof, "Serve Go's profiles under /debug/pprof/ on --http-endpoint.")
	fs.StringVar(&o.MetricsPath, "metrics-path", o.MetricsPath, "Path of the metrics on --http-endpoint.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the API server (events have a budget of their own; the in-flight journal's writes, one at a time, are not counted).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the API server.")
	fs.IntVar(&o.WorkerThreads, "worker-threads", o.WorkerThreads, "Claims, and volumes, worked on at once.")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Bound of one provision or delete operation.")
	fs.DurationVar(&o.RetryIntervalStart, "retry-interval-start", o.RetryIntervalStart, "First retry delay of a failed operation; doubles each time.")
	fs.DurationVar(&o.RetryIntervalMax, "retry-interval-max", o.RetryIntervalMax, "Longest retry delay of a failed operation.")
}

// Complete fills in what the shared flags derive from each other; a binary's
// own Complete calls it first. The shared flags derive nothing today.
func (o *Common) Complete() error { return nil }

// Validate checks the shared flags, naming the flag at fault. It changes
// nothing: defaults are Complete's business.
func (o *Common) Validate() error {
	var errs []error
	if o.provisionerFlag && o.Provisioner == "" {
		errs = append(errs, errors.New("--provisioner must not be empty"))
	} else if o.Provisioner != "" {
		if msgs := validation.IsQualifiedName(o.Provisioner); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--provisioner %q: %s", o.Provisioner, strings.Join(msgs, "; ")))
		}
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be more than 0"))
	}
	if o.WorkerThreads < 1 {
		errs = append(errs, errors.New("--worker-threads must be at least 1"))
	}
	if o.Timeout < 0 {
		errs = append(errs, errors.New("--timeout must not be negative"))
	}
	if o.RetryIntervalStart <= 0 || o.RetryIntervalMax < o.RetryIntervalStart {
		errs = append(errs, errors.New("--retry-interval-start must be more than 0 and at most --retry-interval-max"))
	}
	errs = append(errs, o.validateLeaderElection()...)
	errs = append(errs, o.validateEndpoint()...)
	return errors.Join(errs...)
}

func (o *Common) validateLeaderElection() []error {
	var errs []error
	if o.LeaderElection && !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod && o.RetryPeriod > 0) {
		errs = append(errs, errors.New("need --leader-election-lease-duration > --leader-election-renew-deadline > --leader-election-retry-period > 0"))
	}
	for k, v := range o.LeaseLabels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--leader-election-labels: key %q: %s", k, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--leader-election-labels: value %q of %q: %s", v, k, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// validateEndpoint checks the HTTP endpoint's flags: one address, under
// either name, and what is served there.
func (o *Common) validateEndpoint() []error {
	var errs []error
	if o.HTTPEndpoint != "" && o.MetricsAddress != "" {
		errs = append(errs, errors.New("only one of --metrics-address and --http-endpoint can be set (--metrics-address is its deprecated name)"))
	}
	for flag, addr := range map[string]string{"--http-endpoint": o.HTTPEndpoint, "--metrics-address": o.MetricsAddress} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
		}
	}
	if o.EnablePprof && o.endpoint() == "" {
		errs = append(errs, errors.New("--enable-pprof needs --http-endpoint: the profiles are served there"))
	}
	if !strings.HasPrefix(o.MetricsPath, "/") {
		errs = append(errs, errors.New("--metrics-path must start with /"))
	}
	return errs
}

// endpoint is the address of the HTTP endpoint, under either name.
func (o *Common) endpoint() string {
	if o.HTTPEndpoint != "" {
		return o.HTTPEndpoint
	}
	return o.MetricsAddress
}

// EnvName is the environment variable that sets a flag: --node-name is NODE_NAME.
func EnvName(flag string) string {
	return strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets every flag of fs that was not given on the command line from
// its environment variable (see EnvName), so that every flag can come from a
// ConfigMap or the downward API. Single-letter flags (-v) are left alone.
func ApplyEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || len(f.Name) < 2 {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s (--%s): %w", EnvName(f.Name), f.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// Namespace is where the Lease and the journal live.
func (o *Common) Namespace() string {
	if o.LeaderElectionNamespace != "" {
		return o.LeaderElectionNamespace
	}
	if ns, ok := controller.InClusterNamespace(); ok {
		return ns
	}
	return controller.OutOfClusterNamespace
}

// Clients are the API clients a binary uses.
type Clients struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	// Events has a rate limiter of its own, so events never starve PV writes.
	Events kubernetes.Interface
}

// NewClients builds clients from --kubeconfig (or in-cluster) with the QPS
// settings; userAgent names the binary.
func (o *Common) NewClients(userAgent string) (*Clients, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" || o.Master != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (set --kubeconfig or --master when running out of cluster): %w", err)
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.UserAgent = userAgent + "/" + version.Version
	kube, err := kubernetes.NewForConfig(BuiltinConfig(cfg))
	if err != nil {
		return nil, err
	}
	events, err := kubernetes.NewForConfig(BuiltinConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &Clients{Config: cfg, Kube: kube, Events: events}, nil
}

// BuiltinConfig returns a copy of cfg for clients of built-in types: they
// speak protobuf, so listing tens of thousands of claims at start-up decodes
// several times faster and leaves less garbage than JSON. Clients of custom
// resources keep cfg (JSON).
func BuiltinConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// ControllerOptions turns the shared flags into controller options.
func (o *Common) ControllerOptions(clients *Clients) []controller.Option {
	opts := []controller.Option{
		controller.WithThreadiness(o.WorkerThreads),
		controller.WithOperationTimeout(o.Timeout),
		controller.WithRetryInterval(o.RetryIntervalStart, o.RetryIntervalMax),
		controller.WithEventClient(clients.Events),
		controller.WithJournal(o.Namespace(), ""),
	}
	if o.LeaderElection {
		opts = append(opts, controller.WithLeaderElection(o.Namespace()),
			controller.WithLeaderElectionTimings(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod),
			controller.WithLeaseLabels(o.LeaseLabels))
	} else {
		opts = append(opts, controller.WithoutLeaderElection()) // --leader-election=false, as CSI sidecars
	}
	return opts
}

// RunOptions are what a binary adds to Run.
type RunOptions struct {
	// Ready checks each real dependency (driver socket, backend endpoint).
	Ready map[string]httpendpoint.Check
	// Controller options beyond the shared ones; later ones win.
	Controller []controller.Option
	// Registry receives the controller's and the process's metrics and is
	// served on --http-endpoint; nil means a new one. Pass one to add
	// metrics of your own.
	Registry *prometheus.Registry
}

// Run starts the controller and the HTTP endpoint and returns when ctx ends
// (nil) or when something fails.
func (o *Common) Run(ctx context.Context, clients *Clients, provisionerName string, p controller.Provisioner, ro RunOptions) error {
	logger := klog.FromContext(ctx)
	registry := ro.Registry
	if registry == nil {
		registry = prometheus.NewRegistry()
	}
	if err := registerProcessMetrics(registry); err != nil {
		return err
	}
	opts := append(o.ControllerOptions(clients), controller.WithMetricsRegisterer(registry))
	opts = append(opts, ro.Controller...)
	ctrl, err := controller.NewProvisionController(clients.Kube, provisionerName, p, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Process-wide settings, so the binary makes them, not the library.
	restoreGC := startupGCFor(os.Getenv, containerMemoryLimit()).apply()
	go func() {
		select {
		case <-ctrl.CachesSynced():
		case <-ctx.Done():
		}
		restoreGC()
	}()
	if addr := o.endpoint(); addr != "" {
		ready := map[string]httpendpoint.Check{"controller": func(*http.Request) error { return ctrl.NotReadyReason() }}
		for n, c := range ro.Ready {
			ready[n] = httpendpoint.Cached(c, httpendpoint.DefaultProbeCacheTTL)
		}
		// The CSI sidecars' liveness probe path, /healthz/leader-election.
		live := map[string]httpendpoint.Check{LeaderElectionCheck: ctrl.LeaderElectionHealthy}
		srv := &http.Server{
			Addr: addr,
			Handler: httpendpoint.NewHandler(httpendpoint.Options{
				Gatherer: registry, Registerer: registry, MetricsPath: o.MetricsPath, Live: live, Ready: ready, Pprof: o.EnablePprof,
			}),
			ReadHeaderTimeout: 10 * time.Second,
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if o.HTTPEndpoint == "" {
				return fmt.Errorf("--metrics-address: %w", err)
			}
			return fmt.Errorf("--http-endpoint: %w", err)
		}
		logger.Info("Serving metrics and health", "address", ln.Addr().String())
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "HTTP endpoint failed")
				cancel()
			}
		}()
		defer func() {
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	return ctrl.Run(ctx)
}

// registerProcessMetrics adds Go runtime and process metrics, tolerating a
// registry that has them already.
func registerProcessMetrics(r *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		var are prometheus.AlreadyRegisteredError
		if err := r.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
