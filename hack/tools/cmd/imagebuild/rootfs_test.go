// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// makeDeb builds a package with dpkg-deb from files (path → content).
func makeDeb(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	control := "Package: " + name + "\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: Test <test@example.com>\nDescription: test package\n"
	files["DEBIAN/control"] = control
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := dir + ".deb"
	// --root-owner-group: the files are root's in the package whoever builds it.
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", dir, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

func readTar(t *testing.T, path string) (map[string]*tar.Header, map[string]string, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	hdrs, data := map[string]*tar.Header{}, map[string]string{}
	var order []string
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, data, order
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := hdrs[hdr.Name]; dup {
			t.Errorf("%s is in the tar twice", hdr.Name)
		}
		hdrs[hdr.Name], data[hdr.Name] = hdr, string(b)
		order = append(order, hdr.Name)
	}
}

// needDpkgDeb skips a test that builds packages where dpkg-deb is missing,
// except under CI, where a missing tool fails the test instead of hiding it.
func needDpkgDeb(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("dpkg-deb (Debian's dpkg) is missing: %v", err)
		}
		t.Skip("needs dpkg-deb (Debian's dpkg)")
	}
}

func TestRootfs(t *testing.T) {
	needDpkgDeb(t)
	first := makeDeb(t, "first", map[string]string{
		"usr/bin/tool":                   "old",
		"usr/share/doc/first/copyright":  "license",
		"usr/share/doc/first/README":     "docs",
		"usr/share/man/man1/tool.1":      "manual",
		"etc/dbus-1/system.d/first.conf": "<busconfig/>",
	})
	second := makeDeb(t, "second", map[string]string{"usr/bin/tool": "new", "usr/lib/libx.so": "lib"})
	var users usersFlag
	if err := users.Set("messagebus:100:101"); err != nil {
		t.Fatal(err)
	}
	if err := users.Set("_rpc:101:65534:/run/rpcbind"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	if err := buildRootfs(rootfsOptions{Debs: []string{first, second}, Users: users, Out: out}); err != nil {
		t.Fatal(err)
	}
	hdrs, data, order := readTar(t, out)

	if got := data["usr/bin/tool"]; got != "new" {
		t.Errorf("usr/bin/tool holds %q, want the later package's %q", got, "new")
	}
	for _, want := range []string{"usr/lib/libx.so", "usr/share/doc/first/copyright", "etc/dbus-1/system.d/first.conf", "usr/", "usr/bin/"} {
		if _, ok := hdrs[want]; !ok {
			t.Errorf("%s is missing", want)
		}
	}
	for _, gone := range []string{"usr/share/doc/first/README", "usr/share/man/man1/tool.1"} {
		if _, ok := hdrs[gone]; ok {
			t.Errorf("%s should have been left out (documentation)", gone)
		}
	}
	if h := hdrs["usr/bin/tool"]; h == nil || h.Uid != 0 || h.Gid != 0 {
		t.Errorf("usr/bin/tool is not root's: %+v", h)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("entries not sorted: %s before %s", order[i-1], order[i])
		}
	}
	passwd := data["etc/passwd"]
	for _, want := range []string{"root:x:0:0:", "nobody:x:65534:65534:", "messagebus:x:100:101:", "_rpc:x:101:65534:_rpc:/run/rpcbind:"} {
		if !strings.Contains(passwd, want) {
			t.Errorf("/etc/passwd has no %q:\n%s", want, passwd)
		}
	}
	if group := data["etc/group"]; !strings.Contains(group, "messagebus:x:101:") || !strings.Contains(group, "nogroup:x:65534:") {
		t.Errorf("/etc/group lacks messagebus or nogroup:\n%s", group)
	}
	status := data["var/lib/dpkg/status"]
	for _, want := range []string{"Package: first\nStatus: install ok installed\n", "Package: second\nStatus: install ok installed\n", "Version: 1.0-1\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("dpkg status lacks %q:\n%s", want, status)
		}
	}
	if h := hdrs["var/run"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/run" {
		t.Errorf("var/run is not a link to /run: %+v", h)
	}
	// Without it Ganesha cannot export anything ("setmntent(/etc/mtab): No
	// such file or directory").
	if h := hdrs["etc/mtab"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "../proc/self/mounts" {
		t.Errorf("etc/mtab is not a link to ../proc/self/mounts: %+v", h)
	}
	if h := hdrs["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp is not a sticky world-writable directory: %+v", h)
	}

	// The same packages give the same bytes.
	again := filepath.Join(t.TempDir(), "again.tar.gz")
	if err := buildRootfs(rootfsOptions{Debs: []string{first, second}, Users: users, Out: again}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same packages differ")
	}
}

// TestRootfsPackageDirectoryUnderBaseLink: a package that ships var/run/ as
// a directory (where the base system has the link var/run -> /run) gets its
// files under /run, and the layer holds var/run only once, as the link: a
// layer with both failed to extract ("var/run: Cannot unlink: Is a
// directory").
func TestRootfsPackageDirectoryUnderBaseLink(t *testing.T) {
	needDpkgDeb(t)
	deb := makeDeb(t, "rundir", map[string]string{"var/run/rundir/pidfile": "1", "run/other": "2"})
	out := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	if err := buildRootfs(rootfsOptions{Debs: []string{deb}, Out: out}); err != nil {
		t.Fatal(err)
	}
	hdrs, data, order := readTar(t, out)
	var runEntries []string
	for _, name := range order {
		if name == "var/run" || strings.HasPrefix(name, "var/run/") {
			runEntries = append(runEntries, name)
		}
	}
	if len(runEntries) != 1 || hdrs["var/run"].Typeflag != tar.TypeSymlink {
		t.Errorf("var/run entries %v, want only the link to /run", runEntries)
	}
	if got := data["run/rundir/pidfile"]; got != "1" {
		t.Errorf("run/rundir/pidfile holds %q, want the package's var/run/rundir/pidfile", got)
	}
	if got := data["run/other"]; got != "2" {
		t.Errorf("run/other holds %q, want the package's own", got)
	}
}
