// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeprov/external-storage/test/framework"
)

// skipTests keeps hack/release.sh from running the module's unit tests: this
// test is about tags and versions, and those tests run elsewhere.
var skipTests = []string{"RELEASE_SKIP_TESTS=1"}

// TestReleaseTag releases a provisioner in a clone with hack/release.sh and
// checks the ledger entries it records and what the tag gives in a fresh
// clone without tags after make tags: the binary's --version (with -dirty
// once the module has an uncommitted change or an untracked source file, which
// the build compiles in), the image tag and the version label of the image
// built from it; then what the commit after the tag and a module released
// earlier, with no tag in the clone, give.
func TestReleaseTag(t *testing.T) {
	needTools(t, "git", "make")
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	provisioners, _, err := Provisioners(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(provisioners) < 2 {
		t.Fatalf("need two provisioners with a Makefile (one to tag, one untagged), found %v", provisioners)
	}
	p, untagged := provisioners[0], provisioners[1]
	r := cloneWorkingTree(t)
	r.nextRelease("lib", p.Dir)
	env := isolatedGoEnv(t)
	releaseEnv := append(append([]string{}, env...), skipTests...)
	version, err := Version(r.dir, p.Dir)
	if err != nil {
		t.Fatal(err)
	}
	tag := p.Dir + "/" + version

	// A dirty tree is refused.
	r.write("uncommitted.txt", "work in progress\n")
	if out, err := r.run(".", skipTests, "hack/release.sh", p.Dir); err == nil || !strings.Contains(err.Error(), "not clean") {
		t.Errorf("release.sh on a dirty tree: err=%v, output %q; want a refusal naming the unclean tree", err, out)
	}
	if err := os.Remove(filepath.Join(r.dir, "uncommitted.txt")); err != nil {
		t.Fatal(err)
	}
	// A module that versions.yaml does not list is refused.
	if _, err := r.run(".", skipTests, "hack/release.sh", "test"); err == nil || !strings.Contains(err.Error(), "not a module in versions.yaml") {
		t.Errorf("release.sh test: err=%v; want a refusal (test is never released)", err)
	}

	// A provisioner is released with the lib release it requires.
	start := r.git("rev-parse", "HEAD")
	out := r.must(".", releaseEnv, "hack/release.sh", "lib", p.Dir)
	if !strings.Contains(out, "tagged "+tag) {
		t.Errorf("release.sh output %q does not say it tagged %s", out, tag)
	}
	libVersion, err := Version(r.dir, "lib")
	if err != nil {
		t.Fatal(err)
	}
	if kind := r.git("cat-file", "-t", tag); kind != "tag" {
		t.Errorf("%s is a %s, want an annotated tag", tag, kind)
	}
	// The tag is on the release commit; HEAD is the commit after it.
	released := r.git("rev-parse", "HEAD~1")
	if at := r.git("rev-list", "-n1", tag); at != released {
		t.Errorf("%s points at %s, want the release commit %s", tag, at, released)
	}
	if _, err := r.run(".", skipTests, "hack/release.sh", p.Dir); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("releasing %s twice: err=%v; want a refusal", tag, err)
	}
	// The ledger records both releases, each in a commit after its own.
	ledger, err := Ledger(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []Release{
		{Module: "lib", Version: libVersion, Commit: start},
		{Module: p.Dir, Version: version, Commit: released, Lib: libVersion},
	} {
		if !slices.Contains(ledger, want) {
			t.Errorf("releases.yaml after the release lacks %+v: %+v", want, ledger)
		}
	}

	// A fresh clone of that has no tags; make tags restores them, and the
	// tagged commit builds the released version, lib from its tag.
	f := r.freshClone()
	f.must(".", nil, "make", "tags")
	f.git("checkout", "--quiet", tag)
	bin := filepath.Join(f.dir, "_output", "bin", p.Binary)
	f.must(p.Dir, env, "make", "build")
	checkVersionOutput(t, bin, p.Binary, version, released)
	// Trust issue case 7: what the build compiles in beyond the commit makes
	// it -dirty, an untracked source file as well as a change.
	untracked := filepath.Join(p.Dir, "cmd", p.Binary, "zz_untracked_test_only.go")
	f.write(untracked, "package main\n\nvar _ = \"an untracked source file\"\n")
	f.must(p.Dir, env, "make", "build")
	checkVersionOutput(t, bin, p.Binary, version+"-dirty", released)
	if err := os.Remove(filepath.Join(f.dir, untracked)); err != nil {
		t.Fatal(err)
	}
	mainGo := filepath.Join(p.Dir, "cmd", p.Binary, "main.go")
	f.write(mainGo, f.git("show", "HEAD:"+mainGo)+"\n// An uncommitted change.\n")
	f.must(p.Dir, env, "make", "build")
	checkVersionOutput(t, bin, p.Binary, version+"-dirty", released)
	f.git("checkout", "--quiet", "--", mainGo)
	if ref := f.must(p.Dir, env, "make", "-s", "image-ref"); ref != "ghcr.io/kubeprov/"+p.Binary+":"+version {
		t.Errorf("make image-ref on %s = %s, want ghcr.io/kubeprov/%s:%s", tag, ref, p.Binary, version)
	}
	// One platform is enough here; tests/integration/images builds both.
	f.must(p.Dir, env, "make", "image", "PLATFORMS=linux/amd64")
	checkLayout(t, filepath.Join(f.dir, "_output", "images", p.Binary), version)

	// The commit after the release is a development version after the
	// tag, and a module released earlier (in the ledger, no tag in this
	// clone) a development version after that release.
	short := r.git("rev-parse", "--short=7", "HEAD")
	if got, want := r.must(p.Dir, nil, "make", "-s", "version"), version+"-1-g"+short; got != want {
		t.Errorf("version one commit after %s = %s, want %s", tag, got, want)
	}
	if tags := r.git("tag", "--list", untagged.Dir+"/*"); tags != "" {
		t.Fatalf("the clone has tags of %s: %s", untagged.Dir, tags)
	}
	var earlier *Release
	for i := range ledger {
		if ledger[i].Module == untagged.Dir {
			earlier = &ledger[i]
		}
	}
	want := "v0.0.0-dev+" + short
	if earlier != nil {
		want = earlier.Version + "-" + r.git("rev-list", "--count", earlier.Commit+"..HEAD") + "-g" + short
	}
	if got := r.must(untagged.Dir, nil, "make", "-s", "version"); got != want {
		t.Errorf("version of %s (no tag) = %s, want %s", untagged.Dir, got, want)
	}
	if got, wantRef := r.must(untagged.Dir, nil, "make", "-s", "image-ref"), "ghcr.io/kubeprov/"+untagged.Binary+":"+strings.ReplaceAll(want, "+", "-"); got != wantRef {
		t.Errorf("image of %s = %s, want %s (no + in tags)", untagged.Dir, got, wantRef)
	}
}

// checkVersionOutput runs binary --version.
func checkVersionOutput(t *testing.T, binary, name, version, revision string) {
	t.Helper()
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", binary, err, out)
	}
	want := name + " " + version + " (revision " + revision + ", go"
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("%s --version = %q, want %q...", name, out, want)
	}
}

// checkLayout reads the OCI layout make image wrote: index.json names the
// image index by the tag, the index carries the version annotation, and
// the other entries are an SBOM and a provenance per platform
// (test/integration/images reads their content back from a registry).
func checkLayout(t *testing.T, dir, version string) {
	t.Helper()
	var layoutIndex struct {
		Manifests []struct {
			MediaType    string            `json:"mediaType"`
			Digest       string            `json:"digest"`
			ArtifactType string            `json:"artifactType"`
			Annotations  map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	readJSON(t, filepath.Join(dir, "index.json"), &layoutIndex)
	if len(layoutIndex.Manifests) == 0 {
		t.Fatalf("%s/index.json lists nothing", dir)
	}
	entry := layoutIndex.Manifests[0]
	if got := entry.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("the layout names the image %q, want the tag %s", got, version)
	}
	var index struct {
		Manifests   []json.RawMessage `json:"manifests"`
		Annotations map[string]string `json:"annotations"`
	}
	algo, hex, _ := strings.Cut(entry.Digest, ":")
	readJSON(t, filepath.Join(dir, "blobs", algo, hex), &index)
	if got := index.Annotations["org.opencontainers.image.version"]; got != version {
		t.Errorf("the image index says version %q, want %s", got, version)
	}
	var types []string
	for _, m := range layoutIndex.Manifests {
		types = append(types, m.ArtifactType)
	}
	want := []string{""}
	for range index.Manifests {
		want = append(want, "application/spdx+json", "application/vnd.in-toto+json")
	}
	if !slices.Equal(types, want) {
		t.Errorf("%s/index.json lists entries of artifact types %q, want %q (the image index, then an SBOM and a provenance per platform)", dir, types, want)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// needTools fails (under CI) or skips when a command is missing.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			framework.Unavailable(t, "%s is not installed", tool)
		}
	}
}

// TestVersionTellsTheTruth: in a fresh clone without tags, hack/version.sh
// (the version of binaries, image tags, the SBOM and the provenance) names
// the ledger's release before make tags as after it, and says -dirty for
// what a build compiles in beyond the commit: an untracked source file in the
// module or in lib (trust issue case 7), or a change to a tracked file; not
// for an ignored file.
func TestVersionTellsTheTruth(t *testing.T) {
	needTools(t, "git", "make")
	r := cloneWorkingTree(t)
	const module = "hostpath"
	version := func() string { t.Helper(); return r.must(".", nil, "hack/version.sh", module) }
	clean := version()
	if strings.HasPrefix(clean, "v0.0.0-dev") || strings.Contains(clean, "dirty") {
		t.Fatalf("hack/version.sh %s in a clean clone without tags = %s, want a version after its release in releases.yaml", module, clean)
	}
	r.must(".", nil, "make", "-s", "tags")
	if got := version(); got != clean {
		t.Errorf("hack/version.sh %s = %s after make tags, %s before", module, got, clean)
	}

	for _, file := range []string{
		module + "/cmd/hostpath-provisioner/zz_untracked_test_only.go",
		"lib/version/zz_untracked_test_only.go",
	} {
		r.write(file, "package x\n")
		if got := version(); got != clean+"-dirty" {
			t.Errorf("hack/version.sh %s with the untracked %s = %s, want %s-dirty", module, file, got, clean)
		}
		if err := os.Remove(filepath.Join(r.dir, file)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(r.dir, "_output"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.write("_output/ignored.go", "package x\n")
	if got := version(); got != clean {
		t.Errorf("hack/version.sh %s with an ignored file = %s, want %s", module, got, clean)
	}
	readme := module + "/README.md"
	r.write(readme, r.git("show", "HEAD:"+readme)+"\nAn uncommitted change.\n")
	if got := version(); got != clean+"-dirty" {
		t.Errorf("hack/version.sh %s with a change to %s = %s, want %s-dirty", module, readme, got, clean)
	}
}
