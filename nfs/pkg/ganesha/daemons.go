// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeprov/external-storage/nfs/pkg/supervisor"
)

// Where the daemons listen; fixed by their packages.
const (
	RPCBindSocket   = "/run/rpcbind.sock"
	SystemBusSocket = "/run/dbus/system_bus_socket"
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

// Daemons returns rpcbind, the system D-Bus daemon and ganesha.nfsd, in the
// order they must start. rpcbind and D-Bus are reused when they already run
// (another container of the pod, or the host); Ganesha never is: a running
// one would serve another configuration.
func Daemons(o DaemonOptions) []supervisor.Process {
	pidFile := o.PidFile
	if pidFile == "" {
		pidFile = filepath.Join(filepath.Dir(o.ConfigPath), "ganesha.pid")
	}
	return []supervisor.Process{
		{
			Name:    "rpcbind",
			Path:    "rpcbind",
			Args:    []string{"-f", "-w"},
			Running: func(context.Context) bool { return dialUnix(RPCBindSocket) == nil },
			Ready:   func(context.Context) error { return dialUnix(RPCBindSocket) },
		},
		{
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
		},
		{
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
		},
	}
}

func dialUnix(path string) error {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// Start starts the daemons under a supervisor.
func Start(ctx context.Context, o DaemonOptions, so supervisor.Options) (*supervisor.Supervisor, error) {
	return supervisor.Start(ctx, Daemons(o), so)
}
