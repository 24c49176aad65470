// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIDiff runs hack/apidiff.sh in a clone through lib's life: no
// release yet (an empty ledger), a release, an addition (a minor bump at least), then a removal after
// v1 (a major bump).
func TestAPIDiff(t *testing.T) {
	needTools(t, "git")
	r := cloneWorkingTree(t)
	r.forgetReleases()
	apidiff := func() (string, error) { return r.run(".", nil, "hack/apidiff.sh") }
	expect := func(step string, wantOK bool, wantText string) {
		t.Helper()
		out, err := apidiff()
		if (err == nil) != wantOK {
			t.Fatalf("%s: apidiff.sh succeeded=%v, want %v\n%v\n%s", step, err == nil, wantOK, err, out)
		}
		if text := out + errText(err); !strings.Contains(text, wantText) {
			t.Errorf("%s: apidiff.sh does not say %q:\n%s", step, wantText, text)
		}
	}

	expect("no release", true, "releases.yaml lists no lib release yet")

	// Release lib v0.1.0 with an extra exported function to remove later.
	const extraFile = "lib/version/extra_apidiff_test_only.go"
	r.write(extraFile, "// Copyright 2026 The external-storage Authors.\n// SPDX-License-Identifier: Apache-2.0\n\npackage version\n\n// Extra exists for the API check test.\nfunc Extra() string { return Version }\n")
	r.setVersion("lib", "v0.1.0")
	// The working tree's changelog may already open the next version.
	r.addChangelog("lib", "v0.1.0")
	r.git("add", "-A")
	r.git("commit", "--quiet", "-m", "lib with Extra")
	r.must(".", skipTests, "hack/release.sh", "lib")
	expect("unchanged", true, "API unchanged since lib/v0.1.0")

	// An addition needs a minor version.
	r.write("lib/version/more_apidiff_test_only.go", "// Copyright 2026 The external-storage Authors.\n// SPDX-License-Identifier: Apache-2.0\n\npackage version\n\n// More is new API.\nfunc More() string { return Revision }\n")
	r.setVersion("lib", "v0.1.1")
	expect("addition, patch bump", false, "need a new minor version")
	r.setVersion("lib", "v0.2.0")
	expect("addition, minor bump", true, "a minor release")

	// After v1, a removal needs a major version.
	r.setVersion("lib", "v1.0.0")
	r.addChangelog("lib", "v1.0.0")
	r.git("add", "-A")
	r.git("commit", "--quiet", "-m", "lib v1")
	r.must(".", skipTests, "hack/release.sh", "lib")
	if err := os.Remove(filepath.Join(r.dir, extraFile)); err != nil {
		t.Fatal(err)
	}
	r.setVersion("lib", "v1.1.0")
	expect("removal, minor bump after v1", false, "need a new major version")
	r.setVersion("lib", "v2.0.0")
	expect("removal, major bump", true, "Incompatible changes:")
}

// TestAPIGateInAFreshClone: in a fresh clone, without tags, hack/apidiff.sh
// as make verify runs it (hack/verify.sh) compares lib with its last release
// in releases.yaml, not with nothing: with the working tree's lib released
// there (and its tag gone again), a breaking change to an exported function
// fails it, naming the function, and passes once undone; a ledger whose
// lib commit is missing is an error, not a pass.
func TestAPIGateInAFreshClone(t *testing.T) {
	needTools(t, "git")
	r := cloneWorkingTree(t)
	apidiff := func() (string, error) { return r.run(".", nil, "hack/apidiff.sh") }
	ledger, err := Ledger(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, rel := range ledger {
		if rel.Module == "lib" {
			last = rel.Tag()
		}
	}
	if last == "" {
		t.Fatal("releases.yaml lists no lib release")
	}
	out, err := apidiff()
	if text := out + errText(err); !strings.Contains(text, "since "+last) {
		t.Fatalf("hack/apidiff.sh in a clone without tags does not compare with %s (releases.yaml): err=%v\n%s", last, err, text)
	}

	// lib as it is, released: the baseline from the ledger alone.
	r.nextRelease("lib")
	r.must(".", skipTests, "hack/release.sh", "lib")
	released, err := Version(r.dir, "lib")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range strings.Fields(r.git("tag", "--list")) {
		r.git("tag", "-d", tag)
	}
	r.setVersion("lib", bumpPatch(t, released))
	if out, err := apidiff(); err != nil || !strings.Contains(out, "API unchanged since lib/"+released) {
		t.Fatalf("hack/apidiff.sh with no change since lib/%s: err=%v\n%s", released, err, out)
	}

	// A breaking change to an exported function: String takes an argument.
	const file = "lib/version/version.go"
	orig := r.git("show", "HEAD:"+file) + "\n"
	broken := strings.Replace(orig, "func String() string {", "func String(_ ...string) string {", 1)
	if broken == orig {
		t.Fatalf("%s has no func String() string to change", file)
	}
	r.write(file, broken)
	out, err = apidiff()
	if err == nil || !strings.Contains(out, "./version.String: changed from func() string to func(...string) string") ||
		!strings.Contains(errText(err), "incompatible changes since lib/"+released+" need a new minor version") {
		t.Errorf("hack/apidiff.sh with version.String changed: err=%v; want a failure naming the change\n%s", err, out)
	}
	r.write(file, orig)
	if out, err := apidiff(); err != nil {
		t.Errorf("hack/apidiff.sh with the change undone: %v\n%s", err, out)
	}

	// A baseline that cannot be read is an error, never "nothing to compare".
	ledgerText := r.git("show", "HEAD:releases.yaml") + "\n"
	head := r.git("rev-parse", "HEAD~1") // release.sh recorded lib on the commit before its own
	const absent = "0123456789abcdef0123456789abcdef01234567"
	if !strings.Contains(ledgerText, "commit: "+head) {
		t.Fatalf("releases.yaml does not record lib/%s on %s:\n%s", released, head, ledgerText)
	}
	r.write("releases.yaml", strings.ReplaceAll(ledgerText, "commit: "+head, "commit: "+absent))
	if out, err := apidiff(); err == nil || !strings.Contains(errText(err), "which this clone lacks") {
		t.Errorf("hack/apidiff.sh with lib/%s on a commit the clone lacks: err=%v; want an error\n%s", released, err, out)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
