// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/godbus/dbus/v5"
)

// D-Bus names of Ganesha's export manager.
const (
	BusName          = "org.ganesha.nfsd"
	ExportMgrPath    = "/org/ganesha/nfsd/ExportMgr"
	exportMgrIface   = "org.ganesha.nfsd.exportmgr"
	methodAdd        = exportMgrIface + ".AddExport"
	methodRemove     = exportMgrIface + ".RemoveExport"
	methodShow       = exportMgrIface + ".ShowExports"
	methodNameHasOwn = "org.freedesktop.DBus.NameHasOwner"

	errServiceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
	errNameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
)

// ExportManager adds and removes exports in a running Ganesha.
type ExportManager interface {
	// AddExport loads the EXPORT block of configPath whose Path is path.
	AddExport(ctx context.Context, configPath, path string) error
	// RemoveExport unloads export id; clients are refused from then on.
	RemoveExport(ctx context.Context, id uint16) error
	// Exports returns the loaded exports: id to path.
	Exports(ctx context.Context) (map[uint16]string, error)
}

// Bus talks to Ganesha on the system bus. It reconnects when the bus daemon
// went away (it may be restarted by the supervisor).
type Bus struct {
	mu   sync.Mutex
	conn *dbus.Conn
	// connect opens a connection; dbus.ConnectSystemBus unless set (tests).
	connect func() (*dbus.Conn, error)
}

// NewSystemBus returns a Bus on the system bus; it connects on first use.
func NewSystemBus() *Bus {
	return &Bus{connect: func() (*dbus.Conn, error) { return dbus.ConnectSystemBus() }}
}

// Close closes the connection.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close()
	b.conn = nil
	return err
}

func (b *Bus) get() (*dbus.Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil && b.conn.Connected() {
		return b.conn, nil
	}
	c, err := b.connect()
	if err != nil {
		return nil, fmt.Errorf("connecting to the system D-Bus: %w", err)
	}
	b.conn = c
	return c, nil
}

func (b *Bus) call(ctx context.Context, method string, args ...any) (*dbus.Call, error) {
	c, err := b.get()
	if err != nil {
		return nil, err
	}
	call := c.Object(BusName, ExportMgrPath).CallWithContext(ctx, method, 0, args...)
	if call.Err != nil {
		return nil, callError(method, call.Err)
	}
	return call, nil
}

// callError says in the user's words when Ganesha is simply not running:
// the bus's own message ("The name org.ganesha.nfsd was not provided by any
// .service files") would end up in PVC events.
func callError(method string, err error) error {
	var dbusErr dbus.Error
	if errors.As(err, &dbusErr) && (dbusErr.Name == errServiceUnknown || dbusErr.Name == errNameHasNoOwner) {
		return fmt.Errorf("NFS-Ganesha is not running (nothing owns %s on the system D-Bus): %w", BusName, err)
	}
	return fmt.Errorf("D-Bus %s: %w", method, err)
}

// Running reports whether a Ganesha owns its name on the bus.
func (b *Bus) Running(ctx context.Context) (bool, error) {
	c, err := b.get()
	if err != nil {
		return false, err
	}
	var has bool
	if err := c.BusObject().CallWithContext(ctx, methodNameHasOwn, 0, BusName).Store(&has); err != nil {
		return false, fmt.Errorf("D-Bus NameHasOwner: %w", err)
	}
	return has, nil
}

// AddExport implements ExportManager.
func (b *Bus) AddExport(ctx context.Context, configPath, path string) error {
	_, err := b.call(ctx, methodAdd, configPath, fmt.Sprintf("export(path = %s)", path))
	return err
}

// RemoveExport implements ExportManager.
func (b *Bus) RemoveExport(ctx context.Context, id uint16) error {
	_, err := b.call(ctx, methodRemove, id)
	return err
}

// Exports implements ExportManager.
func (b *Bus) Exports(ctx context.Context) (map[uint16]string, error) {
	call, err := b.call(ctx, methodShow)
	if err != nil {
		return nil, err
	}
	if len(call.Body) != 2 {
		return nil, fmt.Errorf("D-Bus %s: unexpected answer with %d values", methodShow, len(call.Body))
	}
	// Each entry is (id, path, per-protocol activity, time of last request).
	entries, ok := call.Body[1].([][]any)
	if !ok {
		return nil, fmt.Errorf("D-Bus %s: unexpected export list of type %T", methodShow, call.Body[1])
	}
	out := make(map[uint16]string, len(entries))
	for _, e := range entries {
		if len(e) < 2 {
			return nil, fmt.Errorf("D-Bus %s: unexpected export entry %v", methodShow, e)
		}
		id, ok1 := e[0].(uint16)
		path, ok2 := e[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("D-Bus %s: unexpected export entry %v", methodShow, e)
		}
		out[id] = path
	}
	return out, nil
}
