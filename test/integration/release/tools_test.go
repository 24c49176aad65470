// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsCachedOutsideTheClone has two fresh clones share one cache, as
// CI's successive runs do: the first builds imagebuild into the cache's
// tools/, and an image build in the second uses that binary instead of
// building one of its own (golangci-lint took most of a cold CI run that
// way). make -n shows what the image build would run without running it.
func TestToolsCachedOutsideTheClone(t *testing.T) {
	cache := t.TempDir()
	env := []string{"KUBEPROV_CACHE=" + cache, "MAKEFLAGS="}
	dryImage := []string{"-n", "-C", "hostpath", "image", "PLATFORMS=linux/amd64"}

	first := cloneWorkingTree(t)
	bin := first.must(".", env, "hack/tools.sh", "imagebuild")
	if !strings.HasPrefix(bin, filepath.Join(cache, "tools", "imagebuild-")) {
		t.Fatalf("imagebuild built into %s, want it under %s/tools", bin, cache)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}

	second := cloneWorkingTree(t)
	plan := second.must(".", env, "make", dryImage...)
	if strings.Contains(plan, "tools.sh imagebuild") || strings.Contains(plan, "./cmd/imagebuild") {
		t.Errorf("the second clone's image build would build imagebuild again although %s holds it:\n%s", bin, plan)
	}
	if !strings.Contains(plan, bin+" build ") {
		t.Errorf("the second clone's image build does not run the cached %s:\n%s", bin, plan)
	}
	for _, r := range []*repo{first, second} {
		if entries, err := os.ReadDir(filepath.Join(r.dir, "_output", "tools")); err == nil {
			t.Errorf("clone %s has tools of its own in _output/tools: %v", r.dir, entries)
		}
	}
}
