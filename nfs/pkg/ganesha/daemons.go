// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kubeprov/external-storage/nfs/pkg/supervisor"
)

// Where the daemons listen; fixed by their packages.
const (
	RPCBindSocket   = "/run/rpcbind.sock"
	SystemBusSocket = "/run/dbus/system_bus_socket"
)

// rpc.statd, NFSv3's status monitor: Ganesha's lock manager records the
// clients holding locks with it, and when it starts it sends them reboot
// notifications (sm-notify), so that they reclaim their locks.
const (
	// StatdPort is rpc.statd's port, as in the classic nfs-provisioner.
	StatdPort = 662
	// StatdStateDir holds the monitored clients (sm, sm.bak) and the NSM
	// state number: nfs-utils' default, which the sm-notify that rpc.statd
	// runs also uses. Mount persistent storage there for the notifications
	// to survive a new pod.
	StatdStateDir = "/var/lib/nfs"
	// notifyTimeout bounds sm-notify's foreground part; it sends the
	// notifications from a background process of its own, retrying
	// unreachable clients for 15 minutes.
	notifyTimeout = 30 * time.Second
)

// DaemonOptions say how to run ganesha.nfsd.
type DaemonOptions struct {
	// ConfigPath is the configuration file (-f).
	ConfigPath string
	// LogFile receives Ganesha's log (-L); /dev/stderr puts it into the
	// container log.
	LogFile string
	// PidFile (-p); default next to ConfigPath.
	PidFile string
	// Bus checks Ganesha's readiness.
	Bus *Bus
}

// Daemons returns rpcbind, the system D-Bus daemon, ganesha.nfsd and
// rpc.statd, in the order they must start. rpcbind, D-Bus and rpc.statd
// are reused when they already run (another container of the pod, or the
// host); Ganesha never is: a running one would serve another configuration.
// rpc.statd comes after Ganesha, so that each start of Ganesha, which
// forgets its locks, is followed by one of rpc.statd, whose Prepare sends the
// reboot notifications that make the clients it recorded reclaim them.
func Daemons(o DaemonOptions) []supervisor.Process {
	pidFile := o.PidFile
	if pidFile == "" {
		pidFile = filepath.Join(filepath.Dir(o.ConfigPath), "ganesha.pid")
	}
	return []supervisor.Process{rpcbindProcess(), dbusProcess(), ganeshaProcess(o, pidFile), statdProcess()}
}

// rpcbindProcess is rpcbind, reused when its socket answers.
func rpcbindProcess() supervisor.Process {
	return supervisor.Process{
		Name:    "rpcbind",
		Path:    "rpcbind",
		Args:    []string{"-f", "-w"},
		Running: func(context.Context) bool { return dialUnix(RPCBindSocket) == nil },
		Ready:   func(context.Context) error { return dialUnix(RPCBindSocket) },
	}
}

// dbusProcess is the system D-Bus daemon, reused when its socket answers.
func dbusProcess() supervisor.Process {
	return supervisor.Process{
		Name:    "dbus-daemon",
		Path:    "dbus-daemon",
		Args:    []string{"--system", "--nofork", "--nopidfile"},
		Running: func(context.Context) bool { return dialUnix(SystemBusSocket) == nil },
		Ready:   func(context.Context) error { return dialUnix(SystemBusSocket) },
		Prepare: func() error {
			// The system bus socket's directory must be traversable by every D-Bus client.
			if err := os.MkdirAll(filepath.Dir(SystemBusSocket), 0o755); err != nil { //nolint:gosec // G301: see above
				return err
			}
			// A socket left by a dead daemon would make the new one fail.
			if err := os.Remove(SystemBusSocket); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		},
	}
}

// ganeshaProcess is ganesha.nfsd, writing its pid to pidFile: never
// reused, and ready once its export manager answers on D-Bus.
func ganeshaProcess(o DaemonOptions, pidFile string) supervisor.Process {
	return supervisor.Process{
		Name: "ganesha.nfsd",
		Path: "ganesha.nfsd",
		Args: []string{"-F", "-f", o.ConfigPath, "-L", o.LogFile, "-N", "NIV_EVENT", "-p", pidFile},
		Prepare: func() error {
			running, err := o.Bus.Running(context.Background())
			if err != nil {
				return err
			}
			if running {
				return fmt.Errorf("another ganesha.nfsd already owns %s on the system D-Bus; stop it or run without --run-server", BusName)
			}
			return os.MkdirAll(filepath.Dir(pidFile), 0o755) //nolint:gosec // G301: a /run directory, as the daemons expect
		},
		Ready: func(ctx context.Context) error {
			running, err := o.Bus.Running(ctx)
			if err != nil {
				return err
			}
			if !running {
				return fmt.Errorf("%s is not on the system D-Bus yet", BusName)
			}
			_, err = o.Bus.Exports(ctx)
			return err
		},
	}
}

// statdProcess is rpc.statd, reused when its port answers.
func statdProcess() supervisor.Process {
	return supervisor.Process{
		Name: "rpc.statd",
		Path: "rpc.statd",
		// Its Prepare sends the notifications (notifyClients).
		Args:    []string{"--foreground", "--no-syslog", "--no-notify", "--port", strconv.Itoa(StatdPort)},
		Running: func(context.Context) bool { return dialTCP(statdAddress) == nil },
		Ready:   func(context.Context) error { return dialTCP(statdAddress) },
		Prepare: func() error {
			for _, d := range []string{"sm", "sm.bak"} {
				if err := os.MkdirAll(filepath.Join(StatdStateDir, d), 0o700); err != nil {
					return err
				}
			}
			return notifyClients()
		},
	}
}

// notifyClients runs sm-notify: every client recorded as holding locks is
// told the server restarted. -f: sm-notify otherwise notifies once per boot
// of the machine, and Ganesha restarts more often.
func notifyClients() error {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "sm-notify", "-f").CombinedOutput(); err != nil {
		return fmt.Errorf("sm-notify (reboot notifications to NFSv3 clients): %w: %s", err, out)
	}
	return nil
}

// statdAddress is where rpc.statd answers locally.
var statdAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(StatdPort))

// dialUnix and dialTCP report whether something listens at path or addr.
func dialUnix(path string) error { return dial("unix", path) }
func dialTCP(addr string) error  { return dial("tcp", addr) }

func dial(network, addr string) error {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// Start starts the daemons under a supervisor.
func Start(ctx context.Context, o DaemonOptions, so supervisor.Options) (*supervisor.Supervisor, error) {
	return supervisor.Start(ctx, Daemons(o), so)
}
