// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nfs tests nfs-provisioner end to end: the real binary against the
// real control plane and a real NFS-Ganesha (started by the binary itself
// with --run-server, which reuses rpcbind and the system D-Bus when they
// already run), checked through libnfs's userspace client because this
// kernel cannot mount NFS. Ganesha owns fixed ports and a fixed D-Bus name,
// so the tests of this package run one after another, never in parallel,
// and each holds the machine's Ganesha lock (test/backend/nfs.Lock).
package nfs

import (
	"strings"
	"testing"
	"time"

	nfsbackend "github.com/kubeprov/external-storage/test/backend/nfs"
	"github.com/kubeprov/external-storage/test/framework"
)

// cp is the control plane shared by all tests of this package.
var cp *framework.ControlPlane

// clientTools are the NFS client and D-Bus tools the tests run besides the
// server's; hack/deps/nfs.sh installs them.
var clientTools = []string{"dbus-send", "nfs-ls", "nfs-cp", "nfs-cat"}

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{AuditLog: true}, func(c *framework.ControlPlane) { cp = c })
}

// requireNFS fails the test under CI=true, and skips it otherwise, when the
// NFS tools are missing; then it waits for the machine's Ganesha lock and
// holds it until the test ends.
func requireNFS(t *testing.T) {
	t.Helper()
	if missing := nfsbackend.Missing(clientTools...); len(missing) > 0 {
		framework.Unavailable(t, "missing %s: run hack/deps/nfs.sh", strings.Join(missing, ", "))
	}
	unlock, err := nfsbackend.Lock(framework.TestContext(t, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
}
