// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nfs tests nfs-provisioner end to end: the real binary against the
// real control plane and a real NFS-Ganesha (started by the binary itself
// with --run-server, which reuses rpcbind and the system D-Bus when they
// already run), checked through libnfs's userspace client because this
// kernel cannot mount NFS. Ganesha owns fixed ports and a fixed D-Bus name,
// so the tests of this package run one after another, never in parallel.
package nfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

// missing lists what the tests need and the machine lacks.
var missing []string

// tools the tests run; hack/deps/nfs.sh installs them.
var tools = []string{"ganesha.nfsd", "rpcbind", "dbus-daemon", "dbus-send", "nfs-ls", "nfs-cp", "nfs-cat"}

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) {
		cp = c
		for _, tool := range tools {
			if _, err := exec.LookPath(tool); err != nil {
				missing = append(missing, tool)
			}
		}
		if os.Geteuid() != 0 {
			missing = append(missing, "root (ganesha.nfsd and the system D-Bus need it)")
		}
	})
}

// requireNFS fails the test under CI=true, and skips it otherwise, when the
// NFS tools are missing.
func requireNFS(t *testing.T) {
	t.Helper()
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("missing %v: run hack/deps/nfs.sh", missing)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// repoRoot is the directory with go.work, found from the working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the working directory")
		}
		dir = parent
	}
}
