// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"bytes"
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
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumetypes"
	"k8s.io/apimachinery/pkg/util/wait"
)

// A real Cinder (Debian's cinder-api, cinder-scheduler and cinder-volume,
// sqlite, RabbitMQ) on 127.0.0.1 with the test volume driver kept in
// test/testdata/cinder. Installed by hack/deps/cinder.sh.

const (
	rabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	// cinderProject is the project in every URL; Cinder wants it hex.
	cinderProject = "7d1d3a6b5c1e4f0a9b8c7d6e5f4a3b2c"
	backendName   = "kubeprov"
	// stackStartTimeout covers a busy two-core machine: RabbitMQ needs
	// ~20 s, Cinder's services ~40 s to import and report their pools.
	stackStartTimeout = 4 * time.Minute
	// stopTimeout is how long a service gets to exit after SIGTERM before
	// SIGKILL; cinder-volume can hang on shutdown.
	stopTimeout = 10 * time.Second
)

// volumeTypes are the types the test driver serves (see its docstring).
var volumeTypes = []string{"iscsi", "rbd", "fibre_channel", "nvme", "broken"}

// stack is the running Cinder and RabbitMQ.
type stack struct {
	dir      string
	endpoint string // e.g. http://127.0.0.1:PORT/v3
	// tgtPortal is where tgtd serves the iscsi volumes, "" without tgt.
	tgtPortal string
	// processes in start order; stopped in reverse.
	procs []*process
	log   func(string, ...any)
}

type process struct {
	name string
	// stopSignal asks the process to end: SIGTERM, or SIGKILL for one that
	// ignores SIGTERM (tgtd).
	stopSignal syscall.Signal
	// afterStop removes what the process leaves behind when killed.
	afterStop func()
	cmd       *exec.Cmd
	logPath   string
	done      chan struct{}
	err       error
}

// missingComponents names what hack/deps/cinder.sh installs and is absent.
func missingComponents() []string {
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// startStack starts RabbitMQ and Cinder in a temporary directory and
// returns once the scheduler knows the test backend and the volume types
// exist. Where tgt is installed, the driver exports iscsi volumes on a
// tgtd of the stack's own.
func startStack(ctx context.Context, driverDir string, log func(string, ...any)) (_ *stack, retErr error) {
	if missing := missingComponents(); len(missing) > 0 {
		return nil, fmt.Errorf("not installed: %s (run hack/deps/cinder.sh)", strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, stackStartTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "kubeprov-cinder-")
	if err != nil {
		return nil, err
	}
	s := &stack{dir: dir, log: log}
	defer func() {
		if retErr != nil {
			retErr = fmt.Errorf("%w%s", retErr, s.logTails())
			if err := s.stop(); err != nil {
				retErr = fmt.Errorf("%w (and stopping: %w)", retErr, err)
			}
		}
	}()
	// RabbitMQ runs as user rabbitmq: it must reach its own directory.
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
	s.endpoint = fmt.Sprintf("http://127.0.0.1:%d/v3", apiPort)

	if err := s.startRabbit(epmdPort, amqpPort, distPort); err != nil {
		return nil, err
	}
	conf, err := s.writeCinderConf(amqpPort, apiPort)
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
	log("cinder: database ready in %s", time.Since(started).Round(time.Millisecond))

	env := append(os.Environ(), "PYTHONPATH="+driverDir)
	if tgtInstalled() {
		if err := s.startTgt(ctx, tgtPort, tgtControl); err != nil {
			return nil, err
		}
		env = append(env, "KUBEPROV_TGT_PORTAL="+s.tgtPortal, "KUBEPROV_TGT_CONTROL_PORT="+strconv.Itoa(tgtControl),
			"KUBEPROV_TGT_DIR="+filepath.Join(s.dir, "luns"))
	}
	for _, svc := range []string{"cinder-api", "cinder-scheduler", "cinder-volume"} {
		if _, err := s.start(svc, env, nil, svc, "--config-file", conf); err != nil {
			return nil, err
		}
	}
	client, err := s.client()
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, client); err != nil {
		return nil, err
	}
	log("cinder: ready at %s after %s", s.endpoint, time.Since(started).Round(time.Millisecond))
	for _, t := range volumeTypes {
		err := retryLocked(ctx, func() error {
			_, err := volumetypes.Create(ctx, client, volumetypes.CreateOpts{Name: t, IsPublic: ptrTo(true)}).Extract()
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
func (s *stack) startRabbit(epmdPort, amqpPort, distPort int) error {
	if _, err := s.start("epmd", os.Environ(), nil, "epmd", "-port", strconv.Itoa(epmdPort), "-address", "127.0.0.1"); err != nil {
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
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)} //nolint:gosec // ids of a system user
	_, err = s.start("rabbitmq", env, cred, rabbitServer)
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

// startTgt starts a userspace iSCSI target on 127.0.0.1 with a management
// port of its own, so that it never meets another tgtd on the machine.
func (s *stack) startTgt(ctx context.Context, port, control int) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "luns"), 0o755); err != nil {
		return err
	}
	s.tgtPortal = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := s.start("tgtd", os.Environ(), nil, "tgtd", "-f", "-C", strconv.Itoa(control), "--iscsi", "portal="+s.tgtPortal)
	if err != nil {
		return err
	}
	p.stopSignal = syscall.SIGKILL
	p.afterStop = func() {
		sock := fmt.Sprintf("/var/run/tgtd/socket.%d", control)
		_ = os.Remove(sock)
		_ = os.Remove(sock + ".lock")
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("tgtd exited: %w", p.exitError())
		default:
		}
		err := exec.CommandContext(ctx, "tgtadm", "-C", strconv.Itoa(control), "--op", "show", "--mode", "system").Run()
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("starting tgtd on %s: %w", s.tgtPortal, err)
	}
	return nil
}

func (s *stack) writeCinderConf(amqpPort, apiPort int) (string, error) {
	for _, d := range []string{"state", "lock"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return "", err
		}
	}
	conf := fmt.Sprintf(`[DEFAULT]
auth_strategy = noauth_include_project_id
transport_url = rabbit://guest:guest@127.0.0.1:%d/
osapi_volume_listen = 127.0.0.1
osapi_volume_listen_port = %d
osapi_volume_workers = 1
api_paste_config = /etc/cinder/api-paste.ini
state_path = %s
my_ip = 127.0.0.1
host = kubeprov-test
enabled_backends = %s
use_stderr = true

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
`, amqpPort, apiPort, filepath.Join(s.dir, "state"), backendName, filepath.Join(s.dir, "cinder.sqlite"),
		filepath.Join(s.dir, "lock"), backendName, backendName)
	path := filepath.Join(s.dir, "cinder.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// start runs a process in its own process group (so that stop reaches its
// children too) with its output in <dir>/<name>.log.
func (s *stack) start(name string, env []string, cred *syscall.Credential, argv ...string) (*process, error) {
	logPath := filepath.Join(s.dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, stopSignal: syscall.SIGTERM, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	s.procs = append(s.procs, p)
	return p, nil
}

// exitError is why a process that has exited ended.
func (p *process) exitError() error {
	if p.err != nil {
		return p.err
	}
	return errors.New("exit status 0")
}

// client is a noauth block storage client for the test project.
func (s *stack) client() (*gophercloud.ServiceClient, error) {
	provider, err := noauth.NewClient(gophercloud.AuthOptions{Username: "admin", TenantName: cinderProject})
	if err != nil {
		return nil, err
	}
	return noauth.NewBlockStorageNoAuthV3(provider, noauth.EndpointOpts{CinderEndpoint: s.endpoint})
}

// waitReady waits until the scheduler lists the test backend's pool: then
// the API, RabbitMQ, the scheduler and the volume service all work, and a
// create will find a valid backend.
func (s *stack) waitReady(ctx context.Context, c *gophercloud.ServiceClient) error {
	url := c.ServiceURL("scheduler-stats", "get_pools")
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range s.procs {
			select {
			case <-p.done:
				return false, fmt.Errorf("%s exited during start: %w", p.name, p.exitError())
			default:
			}
		}
		var body struct {
			Pools []struct {
				Name string `json:"name"`
			} `json:"pools"`
		}
		_, err := c.Get(ctx, url, &body, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
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
		return fmt.Errorf("waiting for Cinder at %s: %w", s.endpoint, errors.Join(err, lastErr))
	}
	return nil
}

// stop stops the processes in reverse start order (cinder-volume first:
// it can hang once RabbitMQ is gone), each with SIGTERM to its process
// group, then SIGKILL after stopTimeout, and removes the directory.
func (s *stack) stop() error {
	started := time.Now()
	defer func() { s.log("cinder: stopped in %s", time.Since(started).Round(time.Millisecond)) }()
	var errs []error
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, p.stopSignal)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			s.log("cinder: %s did not stop within %s, killing it", p.name, stopTimeout)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		// Children that ignored SIGTERM (erl_child_setup, inet_gethost)
		// must not outlive the test either.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if p.afterStop != nil {
			p.afterStop()
		}
	}
	s.procs = nil
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logTails is the end of every service's log, for start failures.
func (s *stack) logTails() string {
	var b strings.Builder
	for _, p := range s.procs {
		out, _ := os.ReadFile(p.logPath)
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", p.name, p.logPath, tail(out, 15))
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
