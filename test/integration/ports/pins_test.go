// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ports

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeprov/external-storage/test/framework"
)

// A port whose go.mod keeps the old project's client_golang pin compiles
// against lib silently downgraded; it must refuse to start with an error
// that names the module, the version linked and the version lib needs.
func TestPortWithADowngradingPinRefusesToStart(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "port")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "test/ports/subdir-style"))); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// The copy is outside the repository: lib by its absolute path, and the
	// pin the old project's go.mod had (an older release of the same module).
	pinned := strings.ReplaceAll(string(gomod), "=> ../../../lib", "=> "+filepath.Join(root, "lib")) +
		"\nreplace github.com/prometheus/client_golang => github.com/prometheus/client_golang v1.20.5\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(pinned), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "subdir-provisioner")
	build := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-o", bin, "./cmd/subdir-provisioner")
	build.Dir, build.Env = dir, append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the pinned port does not build (lib must compile with the pin; the check is at start-up): %v\n%s", err, out)
	}
	// Started normally, it would run until killed.
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run := exec.CommandContext(runCtx, bin, "-kubeconfig="+cp.KubeconfigPath, "-mount-root="+t.TempDir())
	run.Env = append(os.Environ(), "PROVISIONER_NAME=pins.example.com/nfs", "NFS_SERVER=127.0.0.1", "NFS_PATH=/exports")
	out, err := run.CombinedOutput()
	const want = "github.com/prometheus/client_golang v1.20.5 is linked (replaced by github.com/prometheus/client_golang v1.20.5), lib needs at least v1.23.2"
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("the port with a downgrading pin exited with %v; want a failure saying %q:\n%s", err, want, out)
	}
}
