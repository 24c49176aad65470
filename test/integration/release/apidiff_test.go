// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIDiff runs hack/apidiff.sh in a clone through lib's life: no tag
// yet, a release, an addition (a minor bump at least), then a removal after
// v1 (a major bump).
func TestAPIDiff(t *testing.T) {
	needTools(t, "git")
	r := cloneWorkingTree(t, "lib")
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

	expect("no tag", true, "no lib/vX.Y.Z tag yet")

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

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
