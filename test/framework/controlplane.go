// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package framework runs the real Kubernetes control plane (etcd, kube-apiserver and
// a kube-controller-manager with only the volume controllers) for integration tests
// and demos, and offers watch-based helpers that wait for what a user would observe:
// PVCs bound, PVs released, events recorded.
//
// Start it once per test package with RunMain from TestMain, or with Start from a
// program. The binaries are built from the Go module proxy by hack/controlplane.sh
// (see EnsureBinaries); there is no scheduler, kubelet or namespace controller.
package framework

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// DefaultProcessTimeout bounds the start and the stop of each control plane
	// process when the caller's context has no earlier deadline. The machine this
	// runs on may be busy compiling; a quiet start takes about 4 s.
	DefaultProcessTimeout = 60 * time.Second

	// DefaultControllerManagerReadyTimeout bounds the wait for kube-controller-manager
	// to act on the probe PVC when the caller's context has no earlier deadline.
	DefaultControllerManagerReadyTimeout = 2 * time.Minute
)

// Options for Start.
type Options struct {
	// ControllerManagerArgs are extra kube-controller-manager flags (e.g.
	// --kube-api-qps=1000 for benchmarks). They come after the defaults, so a flag
	// given here overrides the default value.
	ControllerManagerArgs []string
	// AuditLog makes kube-apiserver record every request (who, what, the
	// answer's status; no bodies) in ControlPlane.AuditLog, for
	// AuditEvents and ExpectNoForbidden.
	AuditLog bool
	// APIServerAddress is the IP address kube-apiserver listens on (default
	// 127.0.0.1), for clusters whose nodes reach it from their own network
	// namespaces (test/cluster). Its serving certificate names it.
	APIServerAddress string
	// APIServerPort is the port it listens on (default: a free port).
	APIServerPort int
	// APIServerArgs are extra kube-apiserver flags; each replaces envtest's
	// value of the same flag (e.g. "authorization-mode": {"Node,RBAC"}), and
	// a nil value removes envtest's flag.
	APIServerArgs map[string][]string
	// ServiceAccounts runs what every real cluster runs and envtest turns
	// off: the ServiceAccount admission (a pod without an account gets
	// "default", and a token volume if it mounts one) and the controller
	// that makes each namespace's default account. For tests of pods a
	// provisioner creates and later recognizes.
	ServiceAccounts bool
	// Log, if non-nil, receives progress lines ("building etcd, kube-apiserver...",
	// "apiserver ready at ...").
	Log func(format string, args ...any)
}

// ControlPlane is a running etcd, kube-apiserver and kube-controller-manager, all
// listening on 127.0.0.1, with their state in a temporary directory.
type ControlPlane struct {
	// Config is the admin (system:masters) config. Do not mutate it; use RestConfig
	// for a copy.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// KubeconfigPath is the admin kubeconfig file, for kubectl and child processes.
	KubeconfigPath string
	// CAFile holds the CA of kube-apiserver's serving certificate (what pods
	// find in the kube-root-ca.crt ConfigMap).
	CAFile string
	// BinDir holds the etcd, kube-apiserver and kube-controller-manager binaries.
	BinDir string
	// Dir is the temporary directory with all state and logs; Stop removes it.
	Dir string
	// EtcdLog, APIServerLog and ControllerManagerLog are the processes' output.
	EtcdLog, APIServerLog, ControllerManagerLog string
	// AuditLog is kube-apiserver's audit log (JSON lines), if Options.AuditLog
	// asked for one.
	AuditLog string

	log func(string, ...any)
	env *envtest.Environment
	kcm *controllerManager

	mu       sync.Mutex // serializes RestartAPIServer, AddUser and Stop
	logFiles []*os.File
	stopped  bool
}

// Start builds the binaries if needed (EnsureBinaries), starts etcd and
// kube-apiserver through envtest and then kube-controller-manager with the volume
// controllers. It returns once the controller manager demonstrably works: it has
// set volume.kubernetes.io/storage-provisioner on a probe PVC and removed the
// pvc-protection finalizer of the deleted probe PVC. On error, everything already
// started is stopped again.
//
// ctx bounds the build and each wait; envtest's own start of etcd and
// kube-apiserver takes no context and is bounded by DefaultProcessTimeout instead.
// envtest logs through controller-runtime's global logger: a program should set it
// (sigs.k8s.io/controller-runtime/pkg/log.SetLogger) as RunMain does, or
// controller-runtime prints a warning if envtest first logs after 30 s.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, retErr error) {
	log := opts.Log
	if log == nil {
		log = func(string, ...any) {}
	}

	log("building etcd, kube-apiserver and kube-controller-manager if needed (cold: 10-15 min on 2 cores; warm: a second)...")
	binDir, err := EnsureBinaries(ctx, log)
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "kubeprov-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{
		BinDir:               binDir,
		Dir:                  dir,
		EtcdLog:              filepath.Join(dir, "etcd.log"),
		APIServerLog:         filepath.Join(dir, "kube-apiserver.log"),
		ControllerManagerLog: filepath.Join(dir, "kube-controller-manager.log"),
		KubeconfigPath:       filepath.Join(dir, "admin.kubeconfig"),
		CAFile:               filepath.Join(dir, "ca.crt"),
		log:                  log,
	}
	defer func() {
		if retErr != nil {
			if err := cp.Stop(); err != nil {
				retErr = fmt.Errorf("%w (and stopping what had started: %w)", retErr, err)
			}
		}
	}()

	started := time.Now()
	if err := cp.startAPIServer(ctx, opts); err != nil {
		return nil, err
	}
	log("apiserver ready at %s in %s (kubeconfig: %s)", cp.Config.Host, time.Since(started).Round(time.Millisecond), cp.KubeconfigPath)

	started = time.Now()
	kcmArgs := opts.ControllerManagerArgs
	if opts.ServiceAccounts {
		kcmArgs = append([]string{"--controllers=" + strings.Join(append(slices.Clone(volumeControllers), "serviceaccount-controller"), ",")}, kcmArgs...)
	}
	if err := cp.startControllerManager(ctx, kcmArgs); err != nil {
		return nil, err
	}
	log("kube-controller-manager ready in %s (log: %s)", time.Since(started).Round(time.Millisecond), cp.ControllerManagerLog)
	return cp, nil
}

// startAPIServer starts etcd and kube-apiserver (with an audit log if
// opts.AuditLog) and sets Config, Client and KubeconfigPath.
func (cp *ControlPlane) startAPIServer(ctx context.Context, opts Options) error {
	etcdOut, err := cp.openLog(cp.EtcdLog)
	if err != nil {
		return err
	}
	apiOut, err := cp.openLog(cp.APIServerLog)
	if err != nil {
		return err
	}
	// Explicit 127.0.0.1 addresses (envtest would resolve "localhost") and
	// directories inside Dir: the latter keep the serving certificates across
	// RestartAPIServer, so existing rest.Configs stay valid.
	apiAddress, apiPort := cmp.Or(opts.APIServerAddress, "127.0.0.1"), opts.APIServerPort
	if apiPort == 0 {
		if apiPort, err = FreePort(); err != nil {
			return err
		}
	}
	etcdPort, err := FreePort()
	if err != nil {
		return err
	}
	timeout := processTimeout(ctx)
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory:    cp.BinDir,
		UseExistingCluster:       ptr.To(false),
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  DefaultProcessTimeout,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				URL:     &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))},
				DataDir: filepath.Join(cp.Dir, "etcd"),
				Out:     etcdOut,
				Err:     etcdOut,
			},
			APIServer: &envtest.APIServer{
				SecureServing: envtest.SecureServing{
					ListenAddr: envtest.ListenAddr{Address: apiAddress, Port: strconv.Itoa(apiPort)},
				},
				CertDir: filepath.Join(cp.Dir, "apiserver"),
				Out:     apiOut,
				Err:     apiOut,
			},
		},
	}
	// Without this, a SIGTERM leaves kube-apiserver waiting the full request timeout
	// (60 s) for the controller manager's watches to end; with it, it drains the
	// short requests and gives the rest 2 s.
	cp.env.ControlPlane.APIServer.Configure().Set("shutdown-send-retry-after", "true")
	if opts.AuditLog {
		if err := cp.configureAudit(); err != nil {
			return err
		}
	}
	if opts.ServiceAccounts {
		cp.env.ControlPlane.APIServer.Configure().Disable("disable-admission-plugins")
	}
	for flag, values := range opts.APIServerArgs {
		if values == nil {
			cp.env.ControlPlane.APIServer.Configure().Disable(flag)
		} else {
			cp.env.ControlPlane.APIServer.Configure().Set(flag, values...)
		}
	}
	for _, d := range []string{cp.env.ControlPlane.Etcd.DataDir, cp.env.ControlPlane.APIServer.CertDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// envtest.Start takes no context; its StartTimeout (derived from ctx) bounds it.
	cfg, err := cp.env.Start()
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver from %s: %w\nkube-apiserver log tail:\n%s\netcd log tail:\n%s",
			cp.BinDir, err, fileTail(cp.APIServerLog, 15), fileTail(cp.EtcdLog, 5))
	}
	cp.Config = cfg
	if cp.Client, err = kubernetes.NewForConfig(cp.RestConfig()); err != nil {
		return err
	}
	// envtest renders the admin config as a kubeconfig with embedded certificates.
	if err := os.WriteFile(cp.KubeconfigPath, cp.env.KubeConfig, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(cp.CAFile, cfg.CAData, 0o644); err != nil {
		return err
	}
	if err := cp.waitReady(ctx); err != nil {
		return err
	}
	return checkServerVersion(cp.Client.Discovery())
}

// RestConfig returns a copy of the admin config, safe to mutate.
func (cp *ControlPlane) RestConfig() *rest.Config {
	return rest.CopyConfig(cp.Config)
}

// RestartAPIServer stops kube-apiserver only and starts it again on the same
// address with the same certificates, keeping etcd and its data, so existing
// rest.Configs and clients keep working. It returns when /readyz answers ok.
//
// kube-controller-manager keeps running and reconnects by itself. Tests that call
// this must not run in parallel with tests that need the apiserver.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return errors.New("the control plane is stopped")
	}
	api := cp.env.ControlPlane.GetAPIServer()
	addr := api.HostPort()
	started := time.Now()
	if err := api.Stop(); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w\nkube-apiserver log tail:\n%s", err, fileTail(cp.APIServerLog, 30))
	}
	api.StartTimeout = processTimeout(ctx)
	if err := api.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again on %s: %w\nkube-apiserver log tail:\n%s", addr, err, fileTail(cp.APIServerLog, 15))
	}
	if got := api.HostPort(); got != addr {
		return fmt.Errorf("kube-apiserver came back on %s instead of %s", got, addr)
	}
	if err := cp.waitReady(ctx); err != nil {
		return err
	}
	cp.log("apiserver restarted at %s in %s", cp.Config.Host, time.Since(started).Round(time.Millisecond))
	return nil
}

// waitReady polls /readyz: envtest only waits for /healthz, which passes before
// the RBAC bootstrap policy and the informers are ready.
func (cp *ControlPlane) waitReady(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, processTimeout(ctx), true, func(ctx context.Context) (bool, error) {
		_, last = cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver at %s is not ready: %w (last answer: %w)\nkube-apiserver log tail:\n%s",
			cp.Config.Host, err, last, fileTail(cp.APIServerLog, 15))
	}
	return nil
}

// userFileName keeps file names readable for user names like
// system:serviceaccount:ns:name.
var userFileName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// AddUser provisions a user with a client certificate for the given name and
// groups (which carry no permissions until RBAC grants some) and returns its config
// and a kubeconfig file for it inside Dir.
func (cp *ControlPlane) AddUser(name string, groups []string) (*rest.Config, string, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return nil, "", errors.New("the control plane is stopped")
	}
	user, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: cp.Config.QPS, Burst: cp.Config.Burst})
	if err != nil {
		return nil, "", fmt.Errorf("adding user %q: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, "", fmt.Errorf("rendering kubeconfig for user %q: %w", name, err)
	}
	usersDir := filepath.Join(cp.Dir, "users")
	if err := os.MkdirAll(usersDir, 0o700); err != nil {
		return nil, "", err
	}
	f, err := os.CreateTemp(usersDir, userFileName.ReplaceAllString(name, "_")+"-*.kubeconfig")
	if err != nil {
		return nil, "", err
	}
	if _, err := f.Write(kubeconfig); err != nil {
		_ = f.Close()
		return nil, "", err
	}
	if err := f.Close(); err != nil {
		return nil, "", err
	}
	return rest.CopyConfig(user.Config()), f.Name(), nil
}

// ControllerManagerPID is kube-controller-manager's process id, for
// benchmarks that read its CPU time or pause it.
func (cp *ControlPlane) ControllerManagerPID() int {
	if cp.kcm == nil {
		return 0
	}
	return cp.kcm.cmd.Process.Pid
}

// APIServerPID is kube-apiserver's process id (0 if not found), for
// benchmarks that read its CPU time. envtest keeps the process to itself, so
// it is the process running BinDir's kube-apiserver on this plane's port.
func (cp *ControlPlane) APIServerPID() int {
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		return 0
	}
	port := "--secure-port=" + u.Port()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if args[0] == filepath.Join(cp.BinDir, "kube-apiserver") && slices.Contains(args, port) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// Stop stops exactly the processes Start started (kube-controller-manager,
// kube-apiserver, etcd) and removes Dir. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return nil
	}
	cp.stopped = true

	var errs []error
	if cp.kcm != nil {
		if err := cp.kcm.stop(DefaultProcessTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if cp.env != nil {
		if err := cp.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping kube-apiserver and etcd: %w", err))
		}
	}
	for _, f := range cp.logFiles {
		_ = f.Close()
	}
	if err := os.RemoveAll(cp.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// openLog creates a log file that stays open until Stop (envtest wants writers,
// and kube-apiserver writes to the same file again after a restart).
func (cp *ControlPlane) openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cp.logFiles = append(cp.logFiles, f)
	return f, nil
}

// processTimeout is DefaultProcessTimeout, or less if ctx ends earlier.
func processTimeout(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < DefaultProcessTimeout {
			return max(left, time.Millisecond)
		}
	}
	return DefaultProcessTimeout
}

// FreePort asks the kernel for a free port on 127.0.0.1, for a server of a
// test to listen on.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
