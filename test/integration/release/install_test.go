// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// modulePrefix + a module directory is its module path.
	modulePrefix = "github.com/kubeprov/external-storage/"
	libPath      = modulePrefix + "lib"
)

// TestInstallLikeAUser releases lib and hostpath with hack/release.sh in a
// clone (its own tags: none reach a fresh clone of main), serves the
// clone's tags as a module proxy directory (hack/modproxy.sh, Go's module
// zip format), and then, outside any workspace, does what users do:
// `go install …/hostpath/cmd/hostpath-provisioner@<tag>` and runs it, and
// each third-party-style port (test/ports) `go get`s lib at its tag instead
// of its replace and builds. Our modules come only from that directory;
// third-party ones from this machine's module cache or the Go module proxy.
func TestInstallLikeAUser(t *testing.T) {
	needTools(t, "git", "make")
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Versions(root)
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(mods))
	for _, m := range mods {
		dirs = append(dirs, m.Dir)
	}
	r := cloneWorkingTree(t, dirs...)
	env := isolatedGoEnv(t)
	releaseEnv := append(append([]string{}, env...), skipTests...)
	libVersion, err := Version(r.dir, "lib")
	if err != nil {
		t.Fatal(err)
	}
	hostpathVersion, err := Version(r.dir, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	hostpathTag := "hostpath/" + hostpathVersion

	// A provisioner release needs a released lib.
	out, err := r.run(".", releaseEnv, "hack/release.sh", "hostpath")
	if err == nil || !strings.Contains(err.Error(), "needs an unreleased lib") {
		t.Fatalf("release.sh hostpath with no lib tag: err=%v, output %q; want a refusal saying hostpath needs an unreleased lib", err, out)
	}

	// Asked in the wrong order, lib is still released first; main goes
	// back to replace => ../lib after the tagged release commit.
	start := r.git("rev-parse", "HEAD")
	started := time.Now()
	r.must(".", releaseEnv, "hack/release.sh", "hostpath", "lib")
	t.Logf("released lib and hostpath in %s", time.Since(started).Round(time.Second))
	if at, want := r.git("rev-list", "-n1", "lib/"+libVersion), start; at != want {
		t.Errorf("lib/%s is on %s, want the commit released from, %s", libVersion, at, want)
	}
	if at, want := r.git("rev-list", "-n1", hostpathTag), r.git("rev-parse", "HEAD~1"); at != want {
		t.Errorf("%s is on %s, want the release commit before HEAD, %s", hostpathTag, at, want)
	}
	goMod := r.git("show", hostpathTag+":hostpath/go.mod")
	if strings.Contains(goMod, "replace") || !strings.Contains(goMod, libPath+" "+libVersion) {
		t.Errorf("hostpath/go.mod at %s should require %s %s with no replace:\n%s", hostpathTag, libPath, libVersion, goMod)
	}
	if diff := r.git("diff", "--stat", start, "HEAD"); diff != "" {
		t.Errorf("after the release HEAD differs from the commit released from (main must keep replace => ../lib):\n%s", diff)
	}

	proxy := t.TempDir()
	r.must(".", []string{"MODPROXY_DIR=" + proxy}, "hack/modproxy.sh")
	userEnv := append(append([]string{}, env...),
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOPROXY=file://"+proxy+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB=github.com/kubeprov/external-storage")

	// go install at the tag, as hostpath/README.md tells users.
	bin := t.TempDir()
	started = time.Now()
	if _, err := Run(t.Context(), t.TempDir(), append(userEnv, "GOBIN="+bin), "go", "install",
		modulePrefix+"hostpath/cmd/hostpath-provisioner@"+hostpathVersion); err != nil {
		t.Fatal(err)
	}
	t.Logf("go install hostpath-provisioner@%s in %s", hostpathVersion, time.Since(started).Round(time.Second))
	out, err = Run(t.Context(), bin, nil, filepath.Join(bin, "hostpath-provisioner"), "--version")
	if err != nil {
		t.Fatal(err)
	}
	if want := "hostpath-provisioner " + hostpathVersion + " "; !strings.HasPrefix(out, want) {
		t.Errorf("the installed hostpath-provisioner --version = %q, want %q...", out, want)
	}
	// The hash the release wrote into hostpath's go.sum is the one of the
	// zip a proxy serves from the lib tag, so users' go commands accept it.
	zipHash, err := os.ReadFile(filepath.Join(modCache(env), "cache", "download", modulePrefix+"lib", "@v", libVersion+".ziphash"))
	if err != nil {
		t.Fatal(err)
	}
	wantSum := libPath + " " + libVersion + " " + strings.TrimSpace(string(zipHash))
	if goSum := r.git("show", hostpathTag+":hostpath/go.sum"); !strings.Contains(goSum, wantSum+"\n") {
		t.Errorf("hostpath/go.sum at %s lacks %q, the hash of lib's zip from its tag", hostpathTag, wantSum)
	}

	// Third parties: each port requires lib at its tag instead of its
	// replace of the repository's lib, outside the workspace.
	ports, err := filepath.Glob(filepath.Join(r.dir, "test", "ports", "*", "go.mod"))
	if err != nil || len(ports) == 0 {
		t.Fatalf("no port under test/ports (%v)", err)
	}
	for _, goMod := range ports {
		port := filepath.Base(filepath.Dir(goMod))
		t.Run(port, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), port)
			if err := os.CopyFS(dir, os.DirFS(filepath.Dir(goMod))); err != nil {
				t.Fatal(err)
			}
			binaries, err := filepath.Glob(filepath.Join(dir, "cmd", "*"))
			if err != nil || len(binaries) != 1 {
				t.Fatalf("%s: want one binary under cmd/, found %v (%v)", port, binaries, err)
			}
			binary := filepath.Base(binaries[0])
			started := time.Now()
			for _, args := range [][]string{
				{"mod", "edit", "-dropreplace=" + libPath, "-droprequire=" + libPath},
				{"get", libPath + "@" + libVersion},
				{"build", "-o", filepath.Join(dir, binary), "./cmd/" + binary},
				{"vet", "./..."},
			} {
				if _, err := Run(t.Context(), dir, userEnv, "go", args...); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("go get lib@%s, build and vet of %s in %s", libVersion, port, time.Since(started).Round(time.Second))
			if out, err := Run(t.Context(), dir, userEnv, "go", "list", "-m", libPath); err != nil || strings.TrimSpace(out) != libPath+" "+libVersion {
				t.Errorf("%s uses %q (%v), want %s %s", port, strings.TrimSpace(out), err, libPath, libVersion)
			}
			if _, err := Run(t.Context(), dir, nil, filepath.Join(dir, binary), "--help"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestReleaseNeedsChangelog: no tag without a CHANGELOG.md section for the
// version, and nothing tagged when one module of the release lacks it.
func TestReleaseNeedsChangelog(t *testing.T) {
	needTools(t, "git")
	r := cloneWorkingTree(t, "lib", "hostpath")
	version, err := Version(r.dir, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	r.write("hostpath/CHANGELOG.md", "# Changelog of hostpath-provisioner\n\n## v0.0.1\n\n- An older release.\n")
	r.git("add", "-A")
	r.git("commit", "--quiet", "-m", "hostpath's changelog without the next version")
	out, err := r.run(".", skipTests, "hack/release.sh", "lib", "hostpath")
	if want := "hostpath/CHANGELOG.md has no section for " + version; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("release.sh with no changelog section: err=%v, output %q; want a refusal saying %q", err, out, want)
	}
	if tags := r.git("tag", "--list", "lib/*", "hostpath/*"); tags != "" {
		t.Errorf("a refused release left tags: %s", tags)
	}

	r.write("hostpath/CHANGELOG.md", "# Changelog of hostpath-provisioner\n\n## "+version+"\n\nNothing listed.\n")
	r.git("add", "-A")
	r.git("commit", "--quiet", "-m", "hostpath's changelog with an empty section")
	if _, err := r.run(".", skipTests, "hack/release.sh", "lib", "hostpath"); err == nil || !strings.Contains(err.Error(), "section lists no change") {
		t.Errorf("release.sh with an empty changelog section: err=%v; want a refusal", err)
	}
}

// isolatedGoEnv gives the go commands of a test that releases a module
// version a module cache of their own: the clone tags its own lib v0.1.0,
// whose zip must neither come from nor end up in the shared cache. Other
// modules come from the shared cache's downloads (a valid proxy), else the
// Go module proxy; -trimpath keeps the build cache shared.
func isolatedGoEnv(t *testing.T) []string {
	t.Helper()
	return []string{
		"GOWORK=off",
		"GOFLAGS=-modcacherw -trimpath",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "modcache"),
		"GOPROXY=file://" + filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download") + "," + goEnv(t, "GOPROXY"),
		"CGO_ENABLED=0",
	}
}

// modCache is the GOMODCACHE of an isolatedGoEnv.
func modCache(env []string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "GOMODCACHE="); ok {
			return v
		}
	}
	return ""
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := Run(t.Context(), os.TempDir(), nil, "go", "env", name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestReleaseRefusesUnreleasedLibChange: with lib/vX.Y.Z tagged, a lib
// change hostpath uses refuses hostpath's release (it does not build against
// the release) and leaves no tag or commit; a lib change hostpath does not
// need does not stop it, and hostpath then requires the tagged lib.
func TestReleaseRefusesUnreleasedLibChange(t *testing.T) {
	needTools(t, "git", "make")
	r := cloneWorkingTree(t, "lib", "hostpath")
	releaseEnv := append(isolatedGoEnv(t), skipTests...)
	libVersion, err := Version(r.dir, "lib")
	if err != nil {
		t.Fatal(err)
	}
	hostpathTag := "hostpath/" + func() string {
		v, err := Version(r.dir, "hostpath")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}()
	r.must(".", releaseEnv, "hack/release.sh", "lib")

	const header = "// Copyright 2026 The external-storage Authors.\n// SPDX-License-Identifier: Apache-2.0\n\n"
	r.write("lib/version/unreleased.go", header+"package version\n\n// Unreleased is lib API added after the release.\nfunc Unreleased() string { return Version }\n")
	const user = "hostpath/cmd/hostpath-provisioner/unreleased_test_only.go"
	r.write(user, header+"package main\n\nimport \"github.com/kubeprov/external-storage/lib/version\"\n\nvar _ = version.Unreleased\n")
	r.git("add", "-A")
	r.git("commit", "--quiet", "-m", "hostpath uses unreleased lib API")
	before := r.git("rev-parse", "HEAD")
	out, err := r.run(".", releaseEnv, "hack/release.sh", "hostpath")
	if want := "hostpath needs an unreleased lib: it does not build or vet alone against lib " + libVersion; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("release.sh hostpath using unreleased lib API: err=%v, output %q; want a refusal saying %q", err, out, want)
	}
	if head, tags := r.git("rev-parse", "HEAD"), r.git("tag", "--list", "hostpath/*"); head != before || tags != "" || r.git("status", "--porcelain") != "" {
		t.Errorf("a refused release left HEAD %s (want %s), tags %q, changes %q", head, before, tags, r.git("status", "--porcelain"))
	}

	// lib keeps the addition, hostpath no longer uses it: released against
	// the tagged lib.
	r.git("rm", "--quiet", user)
	r.git("commit", "--quiet", "-m", "hostpath no longer uses unreleased lib API")
	r.must(".", releaseEnv, "hack/release.sh", "hostpath")
	if goMod := r.git("show", hostpathTag+":hostpath/go.mod"); !strings.Contains(goMod, libPath+" "+libVersion+"\n") || strings.Contains(goMod, "replace") {
		t.Errorf("hostpath/go.mod at %s should require %s %s with no replace:\n%s", hostpathTag, libPath, libVersion, goMod)
	}
}
