// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cinder runs cinder-provisioner against a real Cinder as a
// backend.Backend, and holds the Cinder stack it shares with the cinder
// integration tests: Debian's cinder-api, cinder-scheduler and
// cinder-volume, sqlite and RabbitMQ on 127.0.0.1 (cinder-api and tgtd on
// StackOptions.ListenAddress), with the test volume
// driver kept in test/testdata/cinder (installed by hack/deps/cinder.sh).
package cinder

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumetypes"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/framework"
)

// Project is the project in every URL; Cinder wants it hex.
const Project = "7d1d3a6b5c1e4f0a9b8c7d6e5f4a3b2c"

const (
	rabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	backendName  = "kubeprov"
	// stackStartTimeout covers a busy two-core machine: RabbitMQ needs
	// ~20 s, Cinder's services ~40 s to import and report their pools.
	stackStartTimeout = 4 * time.Minute
	// apiStartTimeout bounds a restart of one service (cinder-api,
	// cinder-scheduler).
	apiStartTimeout = 2 * time.Minute
)

// DefaultListenAddress is StackOptions.ListenAddress's default.
const DefaultListenAddress = "127.0.0.1"

// VolumeTypes are the types the test driver serves (see its docstring).
var VolumeTypes = []string{"iscsi", "rbd", "fibre_channel", "nvme", "broken"}

// StackOptions say what to run besides Cinder and RabbitMQ.
type StackOptions struct {
	// ISCSITarget runs a tgtd of the stack's own, where tgt is installed,
	// on which the driver exports iscsi volumes as real LUNs.
	ISCSITarget bool
	// ListenAddress is where cinder-api and tgtd listen (default
	// DefaultListenAddress): the host's address on a cluster's bridge
	// serves pods and nodes too. RabbitMQ stays on 127.0.0.1.
	ListenAddress string
	// Log reports progress; nil is quiet.
	Log func(format string, args ...any)
}

// Stack is a running Cinder and RabbitMQ.
type Stack struct {
	// Endpoint is Cinder's block storage v3 endpoint without the project,
	// e.g. http://127.0.0.1:PORT/v3.
	Endpoint string
	// TGTPortal is where tgtd serves the iscsi volumes, "" without tgt.
	TGTPortal string

	dir    string
	log    func(string, ...any)
	client *gophercloud.ServiceClient
	// opts start a service again after it was stopped (StopAPI,
	// StopScheduler), by binary name.
	opts map[string]framework.ProcessOptions
	// procs in start order; stopped in reverse.
	procs []*service
	// starts counts the starts of each binary, to name its logs.
	starts map[string]int
}

// service is a process of the stack.
type service struct {
	*framework.Process
	// ignoresTerm: SIGTERM does not end it (tgtd); the stack kills it.
	ignoresTerm bool
	// afterStop removes what the process leaves behind when killed.
	afterStop func()
}

// Missing names what hack/deps/cinder.sh installs and is absent.
func Missing() []string {
	var missing []string
	for _, bin := range []string{"cinder-api", "cinder-scheduler", "cinder-volume", "cinder-manage", "epmd", "python3"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if _, err := os.Stat(rabbitServer); err != nil {
		missing = append(missing, rabbitServer)
	}
	if _, err := user.Lookup("rabbitmq"); err != nil {
		missing = append(missing, "user rabbitmq")
	}
	return missing
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		var err error
		if ports[i], err = framework.FreePort(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// StartStack starts RabbitMQ and Cinder in a temporary directory and
// returns once the scheduler knows the test backend and the volume types
// exist.
func StartStack(ctx context.Context, opts StackOptions) (_ *Stack, retErr error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("not installed: %s (run hack/deps/cinder.sh)", strings.Join(missing, ", "))
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	driverDir := filepath.Join(root, "test", "testdata", "cinder")
	ctx, cancel := context.WithTimeout(ctx, stackStartTimeout)
	defer cancel()
	// Not in a caller's directory: RabbitMQ runs as user rabbitmq, which
	// must reach this one.
	dir, err := os.MkdirTemp("", "kubeprov-cinder-")
	if err != nil {
		return nil, err
	}
	listen := cmp.Or(opts.ListenAddress, DefaultListenAddress)
	s := &Stack{dir: dir, log: opts.Log, starts: map[string]int{}, opts: map[string]framework.ProcessOptions{}}
	if s.log == nil {
		s.log = func(string, ...any) {}
	}
	defer func() {
		if retErr != nil {
			retErr = fmt.Errorf("%w%s", retErr, s.logTails())
			if err := s.Stop(); err != nil {
				retErr = fmt.Errorf("%w (and stopping: %w)", retErr, err)
			}
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	epmdPort, amqpPort, distPort, apiPort, tgtPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	// tgtd's management "port" names its unix socket and must be below
	// 32768; one derived from a free TCP port keeps stacks apart.
	tgtControl := tgtPort%32000 + 1
	s.Endpoint = fmt.Sprintf("http://%s/v3", net.JoinHostPort(listen, strconv.Itoa(apiPort)))
	if s.client, err = s.Client(); err != nil {
		return nil, err
	}

	if err := s.startRabbit(ctx, epmdPort, amqpPort, distPort); err != nil {
		return nil, err
	}
	conf, err := s.writeCinderConf(listen, amqpPort, apiPort)
	if err != nil {
		return nil, err
	}
	// The schema is needed before the services start; RabbitMQ boots
	// meanwhile (the services retry until it is up).
	started := time.Now()
	if out, err := exec.CommandContext(ctx, "cinder-manage", "--config-file", conf, "db", "sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cinder-manage db sync: %w\n%s", err, tail(out, 20))
	}
	// WAL lets the API read while cinder-volume writes: fewer "database is
	// locked" answers from sqlite.
	db := filepath.Join(dir, "cinder.sqlite")
	if out, err := exec.CommandContext(ctx, "python3", "-c",
		"import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA journal_mode=WAL')", db).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("enabling WAL on %s: %w\n%s", db, err, out)
	}
	s.log("cinder: database ready in %s", time.Since(started).Round(time.Millisecond))

	env := []string{"PYTHONPATH=" + driverDir}
	if opts.ISCSITarget && tgtInstalled() {
		if err := s.startTgt(ctx, listen, tgtPort, tgtControl); err != nil {
			return nil, err
		}
		env = append(env, "KUBEPROV_TGT_PORTAL="+s.TGTPortal, "KUBEPROV_TGT_CONTROL_PORT="+strconv.Itoa(tgtControl),
			"KUBEPROV_TGT_DIR="+filepath.Join(s.dir, "luns"))
	}
	for _, bin := range []string{"cinder-api", "cinder-scheduler", "cinder-volume"} {
		opts := framework.ProcessOptions{Binary: bin, Args: []string{"--config-file", conf}, Env: env}
		s.opts[bin] = opts
		if _, err := s.start(ctx, opts); err != nil {
			return nil, err
		}
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	s.log("cinder: ready at %s after %s", s.Endpoint, time.Since(started).Round(time.Millisecond))
	for _, t := range VolumeTypes {
		err := retryLocked(ctx, func() error {
			_, err := volumetypes.Create(ctx, s.client, volumetypes.CreateOpts{Name: t, IsPublic: ptrTo(true)}).Extract()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("creating volume type %s: %w", t, err)
		}
	}
	return s, nil
}

// retryLocked retries f while Cinder answers 500: with sqlite, concurrent
// writers (the services' heartbeats) make a write fail with "database is
// locked" now and then.
func retryLocked(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); !gophercloud.ResponseCodeIs(err, http.StatusInternalServerError) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}

func ptrTo[T any](v T) *T { return &v }

// startRabbit starts epmd (so that no daemon outlives the tests) and
// RabbitMQ as user rabbitmq with everything in s.dir.
func (s *Stack) startRabbit(ctx context.Context, epmdPort, amqpPort, distPort int) error {
	epmd := framework.ProcessOptions{Binary: "epmd", Args: []string{"-port", strconv.Itoa(epmdPort), "-address", "127.0.0.1"}}
	if _, err := s.start(ctx, epmd); err != nil {
		return err
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base := filepath.Join(s.dir, "rabbitmq")
	files := map[string]string{
		"rabbitmq.conf":   fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users.guest = true\n", amqpPort),
		"enabled_plugins": "[].\n",
	}
	for _, d := range []string{"mnesia", "log", "home"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			return err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(base, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	}); err != nil {
		return err
	}
	env := []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + filepath.Join(base, "home"),
		"RABBITMQ_NODENAME=rabbit@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort),
		"ERL_EPMD_PORT=" + strconv.Itoa(epmdPort),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(base, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(base, "log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(base, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(base, "enabled_plugins"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(base, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=/dev/null",
	}
	_, err = s.start(ctx, framework.ProcessOptions{
		Binary:       rabbitServer,
		Env:          env,
		NoInheritEnv: true,
		Credential:   &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, //nolint:gosec // ids of a system user
	})
	return err
}

func tgtInstalled() bool {
	for _, bin := range []string{"tgtd", "tgtadm"} {
		if _, err := exec.LookPath(bin); err != nil {
			return false
		}
	}
	return true
}

// startTgt starts a userspace iSCSI target on address with a management
// port of its own, so that it never meets another tgtd on the machine.
func (s *Stack) startTgt(ctx context.Context, address string, port, control int) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "luns"), 0o755); err != nil {
		return err
	}
	s.TGTPortal = net.JoinHostPort(address, strconv.Itoa(port))
	removeSockets := func() {
		sock := fmt.Sprintf("/var/run/tgtd/socket.%d", control)
		_ = os.Remove(sock)
		_ = os.Remove(sock + ".lock")
	}
	svc, err := s.start(ctx, framework.ProcessOptions{
		Binary: "tgtd",
		Args:   []string{"-f", "-C", strconv.Itoa(control), "--iscsi", "portal=" + s.TGTPortal},
		Ready: func(ctx context.Context) error {
			out, err := exec.CommandContext(ctx, "tgtadm", "-C", strconv.Itoa(control), "--op", "show", "--mode", "system").CombinedOutput()
			if err != nil {
				return fmt.Errorf("tgtadm: %w: %s", err, bytes.TrimSpace(out))
			}
			return nil
		},
	})
	if err != nil {
		removeSockets()
		return fmt.Errorf("starting tgtd on %s: %w", s.TGTPortal, err)
	}
	svc.ignoresTerm, svc.afterStop = true, removeSockets
	return nil
}

func (s *Stack) writeCinderConf(listen string, amqpPort, apiPort int) (string, error) {
	for _, d := range []string{"state", "lock"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return "", err
		}
	}
	conf := fmt.Sprintf(`[DEFAULT]
auth_strategy = noauth_include_project_id
transport_url = rabbit://guest:guest@127.0.0.1:%d/
osapi_volume_listen = %s
osapi_volume_listen_port = %d
osapi_volume_workers = 1
api_paste_config = /etc/cinder/api-paste.ini
state_path = %s
my_ip = 127.0.0.1
host = kubeprov-test
enabled_backends = %s
use_stderr = true
# A scale run needs more than the default 10 volumes and 1000 GiB a project.
quota_volumes = -1
quota_gigabytes = -1

[database]
connection = sqlite:///%s?timeout=30

[oslo_concurrency]
lock_path = %s

[oslo_messaging_rabbit]
rabbit_retry_interval = 1
rabbit_retry_backoff = 1

[%s]
volume_driver = kubeprov_test_driver.KubeprovTestDriver
volume_backend_name = %s
`, amqpPort, listen, apiPort, filepath.Join(s.dir, "state"), backendName, filepath.Join(s.dir, "cinder.sqlite"),
		filepath.Join(s.dir, "lock"), backendName, backendName)
	path := filepath.Join(s.dir, "cinder.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// start runs a service of the stack in s.dir and in a process group of its
// own (Cinder's services fork workers, RabbitMQ and tgtd helpers: stopping
// must reach them too), with its output in <dir>/<binary>.log
// (<binary>-<n>.log when started again), returns once it is ready if
// opts.Ready says how to tell, and adds it to those Stop stops.
func (s *Stack) start(ctx context.Context, opts framework.ProcessOptions) (*service, error) {
	name := filepath.Base(opts.Binary)
	s.starts[name]++
	logName := name + ".log"
	if n := s.starts[name]; n > 1 {
		logName = fmt.Sprintf("%s-%d.log", name, n)
	}
	opts.LogPath = filepath.Join(s.dir, logName)
	opts.Dir = s.dir
	opts.ProcessGroup = true
	opts.NoEndpoint = true
	p, err := framework.StartProcess(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	svc := &service{Process: p}
	s.procs = append(s.procs, svc)
	return svc, nil
}

// stop ends a service and every process of its group. Its exit status says
// nothing: epmd, for one, dies of SIGTERM.
func (s *Stack) stop(svc *service) {
	if svc.ignoresTerm {
		_ = svc.Kill()
	} else {
		_ = svc.Stop()
	}
	if svc.afterStop != nil {
		svc.afterStop()
	}
}

// Client is a noauth block storage client for Project.
func (s *Stack) Client() (*gophercloud.ServiceClient, error) {
	provider, err := noauth.NewClient(gophercloud.AuthOptions{Username: "admin", TenantName: Project})
	if err != nil {
		return nil, err
	}
	return noauth.NewBlockStorageNoAuthV3(provider, noauth.EndpointOpts{CinderEndpoint: s.Endpoint})
}

// Volumes lists every volume of Project.
func (s *Stack) Volumes(ctx context.Context) ([]volumes.Volume, error) {
	pages, err := volumes.List(s.client, nil).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return volumes.ExtractVolumes(pages)
}

// waitReady waits until the scheduler lists the test backend's pool: then
// the API, RabbitMQ, the scheduler and the volume service all work, and a
// create will find a valid backend.
func (s *Stack) waitReady(ctx context.Context) error {
	url := s.client.ServiceURL("scheduler-stats", "get_pools")
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range s.procs {
			select {
			case <-p.Exited():
				// Stop gives the exit status, with the log's tail.
				return false, cmp.Or(p.Stop(), fmt.Errorf("%s exited with status 0", p.Name))
			default:
			}
		}
		var body struct {
			Pools []struct {
				Name string `json:"name"`
			} `json:"pools"`
		}
		_, err := s.client.Get(ctx, url, &body, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
		if err != nil {
			lastErr = err
			return false, nil
		}
		for _, p := range body.Pools {
			if strings.HasSuffix(p.Name, "#"+backendName) {
				return true, nil
			}
		}
		lastErr = fmt.Errorf("no pool yet: %v", body.Pools)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Cinder at %s: %w", s.Endpoint, errors.Join(err, lastErr))
	}
	return nil
}

// index is where the service bin is in s.procs, -1 while it is stopped.
func (s *Stack) index(bin string) int {
	for i, p := range s.procs {
		if p.Name == bin {
			return i
		}
	}
	return -1
}

// StopAPI stops cinder-api (SIGTERM, as an operator or an orchestrator
// stops it); the scheduler, the volume service and the volumes stay.
func (s *Stack) StopAPI() error { return s.stopService("cinder-api") }

// StartAPI starts cinder-api again after StopAPI and returns once Cinder
// answers.
func (s *Stack) StartAPI(ctx context.Context) error { return s.startService(ctx, "cinder-api") }

// StopScheduler stops cinder-scheduler (SIGTERM). The API still takes
// creates: their volumes stay "creating" with no host, and the casts to the
// scheduler wait in RabbitMQ.
func (s *Stack) StopScheduler() error { return s.stopService("cinder-scheduler") }

// StartScheduler starts cinder-scheduler again after StopScheduler and
// returns once it lists the test backend's pool; it then handles the
// creates that waited.
func (s *Stack) StartScheduler(ctx context.Context) error {
	return s.startService(ctx, "cinder-scheduler")
}

// stopService stops the service bin and forgets its process.
func (s *Stack) stopService(bin string) error {
	i := s.index(bin)
	if i < 0 {
		return fmt.Errorf("%s is not running", bin)
	}
	s.stop(s.procs[i])
	s.procs = append(s.procs[:i], s.procs[i+1:]...)
	s.log("cinder: %s stopped", bin)
	return nil
}

// startService starts the service bin again after stopService and returns
// once the stack works again (see waitReady).
func (s *Stack) startService(ctx context.Context, bin string) error {
	if s.index(bin) >= 0 {
		return fmt.Errorf("%s is running already", bin)
	}
	if _, err := s.start(ctx, s.opts[bin]); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiStartTimeout)
	defer cancel()
	started := time.Now()
	if err := s.waitReady(ctx); err != nil {
		return fmt.Errorf("%w%s", err, s.logTails())
	}
	s.log("cinder: %s started again, stack ready after %s", bin, time.Since(started).Round(time.Millisecond))
	return nil
}

// Stop stops the processes in reverse start order (cinder-volume first:
// it can hang once RabbitMQ is gone) and removes the directory.
func (s *Stack) Stop() error {
	started := time.Now()
	defer func() { s.log("cinder: stopped in %s", time.Since(started).Round(time.Millisecond)) }()
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.stop(s.procs[i])
	}
	s.procs = nil
	if s.dir == "" {
		return nil
	}
	return os.RemoveAll(s.dir)
}

// logTails is the end of every service's log, for start failures.
func (s *Stack) logTails() string {
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", p.Name, p.LogPath, p.LogTail(15))
	}
	return b.String()
}

func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
