// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nfs runs nfs-provisioner in server mode with a real NFS-Ganesha
// as a backend.Backend, and holds what the nfs integration tests share with
// it: the server's layout and flags, the machine-wide Ganesha lock, and the
// daemons an NFS server needs, started the way nfs-provisioner --run-server
// starts them (nfs/pkg/ganesha.Daemons), here without its supervisor so that
// a killed Ganesha stays down until it is started again.
package nfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	"github.com/kubeprov/external-storage/nfs/pkg/supervisor"
	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

// Loopback is where Ganesha listens and what PVs name as their server.
const Loopback = "127.0.0.1"

// serverTools run an NFS server; hack/deps/nfs.sh installs them.
var serverTools = []string{"ganesha.nfsd", "rpcbind", "dbus-daemon"}

// Missing lists what an NFS server, and the tools named in extra, need and
// this machine lacks (hack/deps/nfs.sh installs them).
func Missing(extra ...string) []string {
	var missing []string
	for _, tool := range append(serverTools, extra...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (ganesha.nfsd and the system D-Bus need it)")
	}
	return missing
}

// lockDir holds the machine-wide lock of Lock: a fixed place (not
// $TMPDIR, which may differ between processes), as Ganesha's ports are.
const lockDir = "/run/lock"

// Lock waits until no other holder of this lock, in this process or
// another, runs an NFS server, and returns the function that releases it.
// Ganesha listens on fixed ports and owns a fixed D-Bus name, and go test
// runs the test binaries of several packages at once: whoever starts a
// Ganesha holds this lock until it has stopped it.
func Lock(ctx context.Context) (unlock func(), err error) {
	unlock, err = framework.LockFile(ctx, lockDir, "kubeprov-ganesha.lock")
	if err != nil {
		return nil, fmt.Errorf("taking the NFS server lock (another test runs Ganesha): %w", err)
	}
	return unlock, nil
}

// Layout is where a server-mode nfs-provisioner keeps its state.
type Layout struct {
	// ExportRoot holds one directory per volume and the identity file.
	ExportRoot string
	// GaneshaConfig is Ganesha's configuration file, outside the export root.
	GaneshaConfig string
}

// NewLayout lays a server out in dir.
func NewLayout(dir string) Layout {
	return Layout{
		ExportRoot:    filepath.Join(dir, "export"),
		GaneshaConfig: filepath.Join(dir, "ganesha", "ganesha.conf"),
	}
}

// Args are nfs-provisioner's flags for server mode as provisioner, on
// loopback, with this layout and no NFSv4 grace period (--run-server, true
// by default, is the caller's choice).
func (l Layout) Args(provisioner string) []string {
	return []string{
		"--mode=server",
		"--provisioner=" + provisioner,
		"--export-root=" + l.ExportRoot,
		"--ganesha-config=" + l.GaneshaConfig,
		"--bind-address=" + Loopback,
		"--grace-period=0",
		"--server-hostname=" + Loopback,
	}
}

// pidFile is where ganesha.Daemons tells ganesha.nfsd to write its pid.
func (l Layout) pidFile() string {
	return filepath.Join(filepath.Dir(l.GaneshaConfig), "ganesha.pid")
}

// GaneshaPid is the pid in Ganesha's pid file.
func (l Layout) GaneshaPid() (int, error) {
	b, err := os.ReadFile(l.pidFile())
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// recoveryDir is Ganesha's NFSv4 recovery directory in the export root,
// where nfs-provisioner puts it.
const recoveryDir = ".ganesha-recovery"

// VolumeDirs lists the volume directories of the export root: Ganesha's
// recovery directory and the identity file are no volumes.
func (l Layout) VolumeDirs() ([]string, error) {
	return backend.Dirs(l.ExportRoot, recoveryDir)
}

// writeConfig writes the configuration nfs-provisioner would write on
// first start (with Args' address and grace period), so that Ganesha can
// start before any provisioner does.
func (l Layout) writeConfig() error {
	_, err := ganesha.EnsureConfig(l.GaneshaConfig, ganesha.BaseOptions{
		BindAddress:  Loopback,
		GracePeriod:  0,
		RecoveryRoot: filepath.Join(l.ExportRoot, recoveryDir),
	})
	if err == nil {
		err = os.MkdirAll(l.ExportRoot, 0o755)
	}
	return err
}

// systemDaemons are rpcbind and the system D-Bus as nfs-provisioner
// --run-server runs them (ganesha.Daemons' options concern only Ganesha,
// the third of its daemons; rpc.statd, the last, is not needed here).
func systemDaemons() []supervisor.Process {
	return ganesha.Daemons(ganesha.DaemonOptions{})[:2]
}

// nfsd is ganesha.nfsd of layout as nfs-provisioner --run-server runs it,
// logging to its standard error.
func nfsd(l Layout, bus *ganesha.Bus) supervisor.Process {
	return ganesha.Daemons(ganesha.DaemonOptions{ConfigPath: l.GaneshaConfig, LogFile: "/dev/stderr", PidFile: l.pidFile(), Bus: bus})[2]
}

// startDaemon runs d's Prepare, starts it with its output in logPath and
// waits until it is Ready.
func startDaemon(ctx context.Context, d supervisor.Process, logPath string) (*framework.Process, error) {
	if d.Prepare != nil {
		if err := d.Prepare(); err != nil {
			return nil, fmt.Errorf("preparing %s: %w", d.Name, err)
		}
	}
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{Binary: d.Path, Args: d.Args, LogPath: logPath, NoEndpoint: true, Ready: d.Ready})
	if err != nil {
		return nil, fmt.Errorf("starting %s (log %s): %w", d.Name, logPath, err)
	}
	return p, nil
}

// StartSystemDaemons starts rpcbind and the system D-Bus, each unless one
// already listens (as nfs-provisioner --run-server reuses them), with their
// output in logDir, and returns those it started, for the caller to stop in
// reverse order.
func StartSystemDaemons(ctx context.Context, logDir string) ([]*framework.Process, error) {
	var started []*framework.Process
	for _, d := range systemDaemons() {
		if d.Running(ctx) {
			continue
		}
		p, err := startDaemon(ctx, d, filepath.Join(logDir, d.Name+".log"))
		if err != nil {
			return started, err
		}
		started = append(started, p)
	}
	return started, nil
}

// SystemDaemonsRunning reports whether rpcbind and the system D-Bus listen.
func SystemDaemonsRunning(ctx context.Context) bool {
	for _, d := range systemDaemons() {
		if !d.Running(ctx) {
			return false
		}
	}
	return true
}

// Ganesha is an NFS-Ganesha with the daemons it needs, run apart from
// nfs-provisioner (as a host service or a sidecar container would run it):
// the storage system of the backend, which can fail on its own.
type Ganesha struct {
	logDir string
	bus    *ganesha.Bus
	nfsd   supervisor.Process
	// system are rpcbind and D-Bus if started here.
	system []*framework.Process
	// proc is the running ganesha.nfsd, nil while it is down.
	proc   *framework.Process
	starts int
}

// StartGanesha writes layout's base configuration unless it exists and
// starts the daemons, logging into logDir; it returns once Ganesha answers
// on D-Bus.
func StartGanesha(ctx context.Context, layout Layout, logDir string) (_ *Ganesha, retErr error) {
	if err := layout.writeConfig(); err != nil {
		return nil, err
	}
	g := &Ganesha{logDir: logDir, bus: ganesha.NewSystemBus()}
	g.nfsd = nfsd(layout, g.bus)
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, g.Close())
		}
	}()
	var err error
	if g.system, err = StartSystemDaemons(ctx, logDir); err != nil {
		return nil, err
	}
	if err := g.Start(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// Start starts ganesha.nfsd (again, after Kill: it loads the exports of its
// configuration file) and waits until it answers on D-Bus.
func (g *Ganesha) Start(ctx context.Context) error {
	if g.proc != nil {
		return errors.New("ganesha.nfsd runs already")
	}
	g.starts++
	p, err := startDaemon(ctx, g.nfsd, filepath.Join(g.logDir, fmt.Sprintf("ganesha.nfsd-%d.log", g.starts)))
	if err != nil {
		return err
	}
	g.proc = p
	return nil
}

// Kill stops ganesha.nfsd the way it dies of a crash or the OOM killer
// (SIGKILL) and waits until its name is gone from D-Bus.
func (g *Ganesha) Kill(ctx context.Context) error {
	if g.proc == nil {
		return errors.New("ganesha.nfsd is not running")
	}
	if err := g.proc.Kill(); err != nil {
		return err
	}
	g.proc = nil
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		running, err := g.bus.Running(ctx)
		return err == nil && !running, nil
	})
}

// Close stops Ganesha and the daemons started with it, newest first.
func (g *Ganesha) Close() error {
	var errs []error
	if g.proc != nil {
		errs = append(errs, g.proc.Stop())
		g.proc = nil
	}
	for i := len(g.system) - 1; i >= 0; i-- {
		errs = append(errs, g.system[i].Stop())
	}
	g.system = nil
	errs = append(errs, g.bus.Close())
	return errors.Join(errs...)
}
