// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	// modulePrefix + a module directory is its module path.
	modulePrefix = "github.com/kubeprov/external-storage/"
	libPath      = modulePrefix + "lib"
)

// TestInstallLikeAUser starts where a user or CI starts, a fresh clone of
// main without tags, and checks the releases of releases.yaml: each commit is
// in main's history and each provisioner's go.mod there requires lib at the
// ledger's version with no replace; hack/modproxy.sh serves them with or
// without tags, the same bytes; make tags restores the tags (again: nothing
// to do; a tag elsewhere is refused, naming it). Then, outside any workspace,
// it does what users do with the clone's proxy in front (GOPROXY=file://):
// `go install …/<dir>/cmd/<binary>@<version>` of each provisioner's release
// prints that version, and a third-party module `go get`s lib at its release
// with the hash the provisioners' go.sum recorded. Last, a release made now
// (hack/release.sh hostpath lib) installs the same way and each
// third-party-style port (test/ports) `go get`s lib at that release instead
// of its replace and builds. Third-party modules come from this machine's
// module cache or the Go module proxy.
func TestInstallLikeAUser(t *testing.T) {
	needTools(t, "git", "make")
	r := cloneWorkingTree(t)
	ledger, err := Ledger(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) == 0 {
		t.Fatal("releases.yaml lists no release")
	}
	checkLedger(t, r, ledger)

	// The proxy serves the ledger's releases with no tag in the clone...
	untagged := t.TempDir()
	r.must(".", []string{"MODPROXY_DIR=" + untagged}, "hack/modproxy.sh")
	if tags := r.git("tag", "--list"); tags != "" {
		t.Errorf("hack/modproxy.sh made tags: %s", tags)
	}
	// ...make tags restores them...
	r.must(".", nil, "make", "-s", "tags")
	for _, rel := range ledger {
		if kind := r.git("cat-file", "-t", rel.Tag()); kind != "tag" {
			t.Errorf("%s is a %s, want an annotated tag", rel.Tag(), kind)
		}
		if at := r.git("rev-parse", rel.Tag()+"^{commit}"); at != rel.Commit {
			t.Errorf("make tags put %s on %s, releases.yaml says %s", rel.Tag(), at, rel.Commit)
		}
	}
	if out := r.must(".", nil, "make", "-s", "tags"); !strings.Contains(out, " 0 tag(s) created") {
		t.Errorf("make tags a second time: %q, want nothing created", out)
	}
	// ...refuses a tag that points elsewhere, creating nothing...
	moved, gone := ledger[len(ledger)-1].Tag(), ledger[0].Tag()
	r.git("tag", "-d", moved, gone)
	r.git("tag", "-a", moved, "-m", "elsewhere", "HEAD")
	if out, err := r.run(".", nil, "make", "-s", "tags"); err == nil || !strings.Contains(err.Error(), moved+" is on "+r.git("rev-parse", "HEAD")) {
		t.Errorf("make tags with %s on HEAD: err=%v, output %q; want a refusal naming it", moved, err, out)
	}
	if r.git("tag", "--list", gone) != "" {
		t.Errorf("a refused make tags created %s", gone)
	}
	r.git("tag", "-d", moved)
	r.must(".", nil, "make", "-s", "tags")
	// ...and the proxy is the same with the tags.
	proxy := t.TempDir()
	r.must(".", []string{"MODPROXY_DIR=" + proxy}, "hack/modproxy.sh")
	if a, b := readTree(t, untagged), readTree(t, proxy); !maps.Equal(a, b) {
		t.Errorf("hack/modproxy.sh serves other files with tags (%d files) than without (%d files)", len(b), len(a))
	}

	env := isolatedGoEnv(t)
	userEnv := append(append([]string{}, env...),
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOPROXY=file://"+proxy+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB=github.com/kubeprov/external-storage")
	provisioners, _, err := Provisioners(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	var libRelease Release
	for _, rel := range ledger {
		for _, p := range provisioners {
			if rel.Module == p.Dir {
				installAndRun(t, userEnv, p, rel.Version)
			}
		}
		if rel.Module == "lib" {
			libRelease = rel
		}
	}
	if libRelease.Version != "" {
		consumeLib(t, r, userEnv, ledger, libRelease)
	}

	// A release made now: lib at HEAD, hostpath on its release commit.
	r.nextRelease("lib", "hostpath")
	libVersion, err := Version(r.dir, "lib")
	if err != nil {
		t.Fatal(err)
	}
	hostpathVersion, err := Version(r.dir, "hostpath")
	if err != nil {
		t.Fatal(err)
	}
	hostpathTag := "hostpath/" + hostpathVersion
	// Asked in the wrong order, lib is still released first; main goes
	// back to replace => ../lib after the tagged release commit.
	start := r.git("rev-parse", "HEAD")
	started := time.Now()
	r.must(".", append(append([]string{}, env...), skipTests...), "hack/release.sh", "hostpath", "lib")
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
	if diff := r.git("diff", "--name-only", start, "HEAD"); diff != "releases.yaml" {
		t.Errorf("after the release HEAD differs from the commit released from in %q, want releases.yaml alone (main keeps replace => ../lib)", diff)
	}
	proxy = t.TempDir()
	r.must(".", []string{"MODPROXY_DIR=" + proxy}, "hack/modproxy.sh")
	userEnv = append(userEnv, "GOPROXY=file://"+proxy+","+goEnv(t, "GOPROXY"))
	installAndRun(t, userEnv, Provisioner{Dir: "hostpath", Binary: "hostpath-provisioner"}, hostpathVersion)
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
	buildPorts(t, r, userEnv, libVersion)
}

// checkLedger: every release's commit is in HEAD's history (main's, in CI)
// and a provisioner's go.mod there requires lib at the ledger's version, a
// release the ledger lists, with no replace.
func checkLedger(t *testing.T, r *repo, ledger []Release) {
	t.Helper()
	seen := map[string]bool{}
	for _, rel := range ledger {
		if seen[rel.Tag()] {
			t.Errorf("releases.yaml lists %s twice", rel.Tag())
		}
		seen[rel.Tag()] = true
		if _, err := r.run(".", nil, "git", "merge-base", "--is-ancestor", rel.Commit, "HEAD"); err != nil {
			t.Errorf("%s: commit %s is not in HEAD's history: %v", rel.Tag(), rel.Commit, err)
			continue
		}
		if _, err := Version(r.dir, rel.Module); err != nil {
			t.Errorf("%s: %v", rel.Tag(), err)
		}
		if rel.Module == "lib" {
			continue
		}
		if !seen["lib/"+rel.Lib] {
			t.Errorf("%s requires lib %q, which releases.yaml does not list before it", rel.Tag(), rel.Lib)
		}
		goMod := r.git("show", rel.Commit+":"+rel.Module+"/go.mod")
		if !regexp.MustCompile(`(?m)^\s*(require\s+)?`+regexp.QuoteMeta(libPath+" "+rel.Lib)+`\s*$`).MatchString(goMod) || regexp.MustCompile(regexp.QuoteMeta(libPath)+`(\s+\S+)?\s+=>`).MatchString(goMod) {
			t.Errorf("%s/go.mod at %s (%s) should require %s %s with no replace:\n%s", rel.Module, rel.Commit, rel.Tag(), libPath, rel.Lib, goMod)
		}
	}
}

// installAndRun go installs a provisioner at a version as its README says
// and checks what --version prints.
func installAndRun(t *testing.T, userEnv []string, p Provisioner, version string) {
	t.Helper()
	bin := t.TempDir()
	started := time.Now()
	if _, err := Run(t.Context(), t.TempDir(), append(userEnv, "GOBIN="+bin), "go", "install",
		modulePrefix+p.Dir+"/cmd/"+p.Binary+"@"+version); err != nil {
		t.Fatal(err)
	}
	t.Logf("go install %s@%s in %s", p.Binary, version, time.Since(started).Round(time.Second))
	out, err := Run(t.Context(), bin, nil, filepath.Join(bin, p.Binary), "--version")
	if err != nil {
		t.Fatal(err)
	}
	if want := p.Binary + " " + version + " "; !strings.HasPrefix(out, want) {
		t.Errorf("the installed %s --version = %q, want %q...", p.Binary, out, want)
	}
}

// consumeLib: a third-party module go gets lib at a release of the ledger,
// with the hash each provisioner released against it recorded in its go.sum.
func consumeLib(t *testing.T, r *repo, userEnv []string, ledger []Release, lib Release) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/kubeprov/external-storage/lib/version\"\n)\n\nfunc main() { fmt.Println(version.String()) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/thirdparty"},
		{"get", libPath + "@" + lib.Version},
		{"build", "-o", "thirdparty", "."},
	} {
		if _, err := Run(t.Context(), dir, userEnv, "go", args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Run(t.Context(), dir, nil, filepath.Join(dir, "thirdparty")); err != nil {
		t.Error(err)
	}
	goSum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	var libSum string
	for _, line := range strings.Split(string(goSum), "\n") {
		if strings.HasPrefix(line, libPath+" "+lib.Version+" ") {
			libSum = line
		}
	}
	for _, rel := range ledger {
		if rel.Lib == lib.Version {
			if released := r.git("show", rel.Commit+":"+rel.Module+"/go.sum"); libSum == "" || !strings.Contains(released, libSum+"\n") {
				t.Errorf("%s/go.sum at %s lacks %q, the hash of lib %s from the clone's proxy", rel.Module, rel.Tag(), libSum, lib.Version)
			}
		}
	}
}

// buildPorts: each third-party-style port requires lib at a release instead
// of its replace of the repository's lib, outside the workspace.
func buildPorts(t *testing.T, r *repo, userEnv []string, libVersion string) {
	t.Helper()
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

// readTree maps each file under dir to its content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestReleaseNeedsChangelog: no tag without a CHANGELOG.md section for the
// version, and nothing tagged when one module of the release lacks it.
func TestReleaseNeedsChangelog(t *testing.T) {
	needTools(t, "git")
	r := cloneWorkingTree(t)
	r.forgetReleases()
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
	r := cloneWorkingTree(t)
	// From the start of the repository's releases: with no lib release in
	// the ledger, a provisioner's release needs one.
	r.forgetReleases()
	releaseEnv := append(isolatedGoEnv(t), skipTests...)
	if out, err := r.run(".", releaseEnv, "hack/release.sh", "hostpath"); err == nil || !strings.Contains(err.Error(), "needs an unreleased lib") {
		t.Fatalf("release.sh hostpath with no lib release: err=%v, output %q; want a refusal saying hostpath needs an unreleased lib", err, out)
	}
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
