// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// gitIdentity lets git commit and tag in a clone on any machine.
var gitIdentity = []string{
	"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release-test@example.com",
	"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release-test@example.com",
	"GIT_CONFIG_NOSYSTEM=1",
}

// repo is a throwaway clone that commands run in.
type repo struct {
	t   *testing.T
	ctx context.Context
	dir string
}

// cloneWorkingTree clones the repository without its tags into a temporary
// directory, as a user's or CI's fresh clone of main is (tags are not
// cloned; releases.yaml is), and commits there whatever the working tree
// changes (so that uncommitted work is what gets tested, and CI's clean
// checkout is tested as it is).
func cloneWorkingTree(t *testing.T) *repo {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	r := &repo{t: t, ctx: t.Context(), dir: filepath.Join(t.TempDir(), "repo")}
	if _, err := Run(r.ctx, root, nil, "git", "clone", "--quiet", "--no-tags", "--no-hardlinks", root, r.dir); err != nil {
		t.Fatal(err)
	}
	changed := r.gitIn(root, "ls-files", "-z", "--modified", "--others", "--exclude-standard")
	for _, f := range strings.Split(strings.TrimRight(changed, "\x00"), "\x00") {
		if f != "" {
			copyFile(t, filepath.Join(root, f), filepath.Join(r.dir, f))
		}
	}
	deleted := r.gitIn(root, "ls-files", "-z", "--deleted")
	for _, f := range strings.Split(strings.TrimRight(deleted, "\x00"), "\x00") {
		if f != "" {
			if err := os.Remove(filepath.Join(r.dir, f)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
	r.git("add", "-A")
	if r.git("status", "--porcelain") != "" {
		r.git("commit", "--quiet", "--no-verify", "-m", "the working tree under test")
	}
	if tags := r.git("tag", "--list"); tags != "" {
		t.Fatalf("a clone with --no-tags has tags: %s", tags)
	}
	return r
}

// forgetReleases empties the clone's releases.yaml, for tests of a
// repository's life from its first release on.
func (r *repo) forgetReleases() {
	r.t.Helper()
	r.write("releases.yaml", "# No release yet (a release test).\n")
	r.git("commit", "--quiet", "-m", "no release yet", "--", "releases.yaml")
}

// nextRelease makes versions.yaml's version of each module one that
// releases.yaml does not list yet (the next patch), with its changelog
// section, and commits, so that hack/release.sh may release it.
func (r *repo) nextRelease(modules ...string) {
	r.t.Helper()
	ledger, err := Ledger(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range modules {
		version, err := Version(r.dir, m)
		if err != nil {
			r.t.Fatal(err)
		}
		next := version
		for slices.ContainsFunc(ledger, func(rel Release) bool { return rel.Tag() == m+"/"+next }) {
			next = bumpPatch(r.t, next)
		}
		if next != version {
			r.setVersion(m, next)
			r.addChangelog(m, next)
		}
	}
	r.git("add", "-A")
	if r.git("status", "--porcelain") != "" {
		r.git("commit", "--quiet", "-m", "next versions")
	}
}

func bumpPatch(t *testing.T, version string) string {
	t.Helper()
	i := strings.LastIndex(version, ".")
	patch, err := strconv.Atoi(version[i+1:])
	if err != nil {
		t.Fatalf("%s is not vX.Y.Z", version)
	}
	return version[:i+1] + strconv.Itoa(patch+1)
}

// freshClone clones the clone as a user clones the repository: no tags.
func (r *repo) freshClone() *repo {
	r.t.Helper()
	f := &repo{t: r.t, ctx: r.ctx, dir: filepath.Join(r.t.TempDir(), "fresh")}
	r.git("clone", "--quiet", "--no-tags", r.dir, f.dir)
	if tags := f.git("tag", "--list"); tags != "" {
		r.t.Fatalf("a clone with --no-tags has tags: %s", tags)
	}
	return f
}

// git runs git in the clone and returns its trimmed output.
func (r *repo) git(args ...string) string {
	r.t.Helper()
	return r.gitIn(r.dir, args...)
}

func (r *repo) gitIn(dir string, args ...string) string {
	r.t.Helper()
	out, err := Run(r.ctx, dir, gitIdentity, "git", args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// run runs a command in the clone (dir relative to it) and returns its
// output and error, for commands expected to fail.
func (r *repo) run(dir string, env []string, name string, args ...string) (string, error) {
	return Run(r.ctx, filepath.Join(r.dir, dir), append(env, gitIdentity...), name, args...)
}

// must is run for commands that must succeed.
func (r *repo) must(dir string, env []string, name string, args ...string) string {
	r.t.Helper()
	out, err := r.run(dir, env, name, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// write replaces a file of the clone.
func (r *repo) write(path, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, path), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// setVersion sets a module's next version in the clone's versions.yaml.
func (r *repo) setVersion(module, version string) {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(r.dir, "versions.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, module+":") {
			lines[i], found = module+": "+version, true
		}
	}
	if !found {
		r.t.Fatalf("versions.yaml has no module %s", module)
	}
	r.write("versions.yaml", strings.Join(lines, "\n"))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	fi, err := os.Lstat(from)
	if err != nil {
		if os.IsNotExist(err) {
			return // deleted meanwhile
		}
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		return
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// addChangelog puts a section for version at the top of module/CHANGELOG.md,
// as hack/release.sh wants.
func (r *repo) addChangelog(module, version string) {
	r.t.Helper()
	file := filepath.Join(module, "CHANGELOG.md")
	data, err := os.ReadFile(filepath.Join(r.dir, file))
	if err != nil {
		r.t.Fatal(err)
	}
	text := string(data)
	section := "## " + version + "\n\n- A change of the release test.\n\n"
	if i := strings.Index(text, "\n## "); i >= 0 {
		text = text[:i+1] + section + text[i+1:]
	} else {
		text += "\n" + section
	}
	r.write(file, text)
}
