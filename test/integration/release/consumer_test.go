// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const libPath = "github.com/kubeprov/external-storage/lib"

// tinyProvisioner is what a third party writes against lib: a Provisioner,
// the shared flags and the command plumbing.
const tinyProvisioner = `// A tiny provisioner built against lib as a third party would.
package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
)

type provisioner struct{ root string }

func (p *provisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	dir := filepath.Join(p.root, o.PVName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	pv := o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
	})
	return pv, controller.ProvisioningFinished, nil
}

func (p *provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	return os.RemoveAll(filepath.Join(p.root, pv.Name))
}

type options struct {
	cli.Common
	root string
}

func (o *options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.root, "root", "/var/lib/tiny", "Where volumes are created.")
}

func (o *options) Run(ctx context.Context) error {
	clients, err := o.NewClients("tiny-provisioner")
	if err != nil {
		return err
	}
	return o.Common.Run(ctx, clients, o.Provisioner, &provisioner{root: o.root}, cli.RunOptions{})
}

func main() {
	o := &options{Common: cli.NewCommon("example.com/tiny")}
	if err := cli.NewCommand("tiny-provisioner", "A tiny provisioner.", o).Execute(); err != nil {
		os.Exit(1)
	}
}
`

// TestLibConsumable publishes lib, as its next release in versions.yaml, to
// a module proxy in a directory (the zip a proxy would serve, made with
// golang.org/x/mod/zip from lib as it is now) and builds, vets and runs a
// provisioner in a separate module that requires it from there, outside the
// workspace.
func TestLibConsumable(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	version, err := Version(root, "lib")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	publish(t, proxy, filepath.Join(root, "lib"), module.Version{Path: libPath, Version: version})

	consumer := t.TempDir()
	writeFile(t, filepath.Join(consumer, "go.mod"), "module example.com/tiny\n\ngo 1.26\n\nrequire "+libPath+" "+version+"\n")
	// lib's own checksums cover its dependencies, as a go.sum from go get
	// would; lib itself is not in the checksum database (GONOSUMDB).
	libSum, err := os.ReadFile(filepath.Join(root, "lib", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(consumer, "go.sum"), string(libSum))
	writeFile(t, filepath.Join(consumer, "main.go"), tinyProvisioner)

	goEnv := func(name string) string {
		out, err := Run(t.Context(), consumer, []string{"GOWORK=off"}, "go", "env", name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	// A module cache of its own, so that a lib zip cached by an earlier run
	// can never stand in for this one; the dependencies come from the shared
	// cache's download directory (a valid proxy), so nothing is fetched, and
	// -trimpath lets the build cache serve their compiled packages.
	sharedDownloads := filepath.Join(goEnv("GOMODCACHE"), "cache", "download")
	env := []string{
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "modcache"),
		"GOPROXY=file://" + proxy + ",file://" + sharedDownloads + ",https://proxy.golang.org",
		"GONOSUMDB=github.com/kubeprov/*",
		"GOPRIVATE=",
		"CGO_ENABLED=0",
	}
	started := time.Now()
	bin := filepath.Join(t.TempDir(), "tiny-provisioner")
	for _, args := range [][]string{{"build", "-o", bin, "."}, {"vet", "./..."}} {
		if _, err := Run(t.Context(), consumer, env, "go", args...); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("built and vetted the consumer in %s", time.Since(started).Round(time.Second))
	if out, err := Run(t.Context(), consumer, env, "go", "list", "-m", libPath); err != nil || strings.TrimSpace(out) != libPath+" "+version {
		t.Errorf("the consumer uses %q (%v), want %s %s", strings.TrimSpace(out), err, libPath, version)
	}
	out, err := Run(t.Context(), consumer, nil, bin, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--root", "--provisioner", "--kubeconfig", "--leader-election", "--http-endpoint", "--version"} {
		if !strings.Contains(out, flag) {
			t.Errorf("tiny-provisioner --help lacks %s:\n%s", flag, out)
		}
	}
}

// publish writes what a module proxy serves for m (list, .info, .mod, .zip)
// under dir, from the module's source directory src.
func publish(t *testing.T, dir, src string, m module.Version) {
	t.Helper()
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, escaped, "@v")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(base, m.Version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := modzip.CreateFromDir(zf, m, src); err != nil {
		t.Fatalf("zipping %s as %s: %v", src, m, err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(map[string]any{"Version": m.Version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(base, m.Version+".mod"), string(goMod))
	writeFile(t, filepath.Join(base, m.Version+".info"), string(info))
	writeFile(t, filepath.Join(base, "list"), m.Version+"\n")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
