// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Fixed ports of the side protocols, so that a Service can expose them (the
// classic nfs-provisioner's values; NFS itself is 2049, rpcbind 111).
const (
	MountdPort = 20048
	NLMPort    = 32803
	RquotaPort = 875
	NFSPort    = 2049
	RPCBind    = 111
)

// BaseOptions shape the configuration written on first start.
type BaseOptions struct {
	// BindAddress is where ganesha.nfsd listens; "" means every address.
	BindAddress string
	// GracePeriod in seconds after a restart during which NFSv4 clients
	// reclaim their locks and state; new state waits until it ends.
	GracePeriod int
	// RecoveryRoot keeps NFSv4 client records across restarts; it must be on
	// persistent storage or clients cannot reclaim their state and hang.
	RecoveryRoot string
	// FsidDevice, when set, is NFS_Core_Param's fsid_device: file handles
	// name the file system by its device numbers instead of its own id.
	FsidDevice *bool
}

// BaseConfig returns the configuration nfs-provisioner writes when the file
// does not exist yet. Kerberos is off (exports are SecType sys), which also
// keeps Ganesha from looking for a keytab at start.
func BaseConfig(o BaseOptions) string {
	var b strings.Builder
	b.WriteString("# Written by nfs-provisioner on first start. EXPORT blocks below are\n")
	b.WriteString("# added and removed by nfs-provisioner; edit the rest as you like.\n")
	b.WriteString("NFS_Core_Param {\n")
	if o.BindAddress != "" {
		fmt.Fprintf(&b, "\tBind_addr = %s;\n", o.BindAddress)
	}
	fmt.Fprintf(&b, "\tMNT_Port = %d;\n\tNLM_Port = %d;\n\tRquota_Port = %d;\n", MountdPort, NLMPort, RquotaPort)
	if o.FsidDevice != nil {
		fmt.Fprintf(&b, "\tfsid_device = %t;\n", *o.FsidDevice)
	}
	b.WriteString("}\n")
	b.WriteString("NFS_KRB5 {\n\tActive_krb5 = false;\n}\n")
	b.WriteString("NFSV4 {\n")
	fmt.Fprintf(&b, "\tGrace_Period = %d;\n", o.GracePeriod)
	fmt.Fprintf(&b, "\tRecoveryRoot = %s;\n", o.RecoveryRoot)
	b.WriteString("}\n")
	return b.String()
}

// EnsureConfig writes the base configuration to path unless the file exists,
// and creates the recovery directory. It reports whether it wrote the file.
func EnsureConfig(path string, o BaseOptions) (bool, error) {
	if err := os.MkdirAll(o.RecoveryRoot, 0o700); err != nil {
		return false, fmt.Errorf("creating Ganesha recovery directory: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	// The configuration's directory (/etc/ganesha) is read by Ganesha's tools too.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // G301: see above
		return false, err
	}
	if err := WriteFileAtomic(path, BaseConfig(o)); err != nil {
		return false, fmt.Errorf("writing Ganesha configuration: %w", err)
	}
	return true, nil
}

// fsidDeviceSetting finds fsid_device in a configuration (Ganesha's keys
// ignore case; commented-out lines do not count).
var fsidDeviceSetting = regexp.MustCompile(`(?im)^[ \t]*fsid_device[ \t]*=[ \t]*([a-z0-9]+)[ \t]*;`)

// CheckFsidDevice returns an error unless the configuration at path sets
// fsid_device to want (absent means Ganesha's default, false). Changing it
// under existing clients makes their file handles stale, so it is never
// rewritten: the administrator edits the file, knowing that.
func CheckFsidDevice(path string, want bool) error {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the administrator's --ganesha-config
	if err != nil {
		return err
	}
	got := false
	if m := fsidDeviceSetting.FindSubmatch(b); m != nil {
		v := strings.ToLower(string(m[1]))
		// Ganesha's booleans: true/false, yes/no, on/off, 1/0.
		switch v {
		case "yes", "on":
			got = true
		case "no", "off":
		default:
			if got, err = strconv.ParseBool(v); err != nil {
				return fmt.Errorf("%s: fsid_device = %s is not a boolean", path, m[1])
			}
		}
	}
	if got != want {
		return fmt.Errorf("%s has fsid_device = %t (false when absent) but --device-based-fsids=%t; edit NFS_Core_Param in the file (clients must mount again: their file handles become stale) or drop the flag", path, got, want)
	}
	return nil
}
