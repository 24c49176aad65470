// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestPhasesReportAStoppedRunAsFailed stops hack/phases.sh in the middle of
// a phase, as a CI timeout does: its summary, often all of a log that is
// read, must say FAILED and name the phase, never "passed".
func TestPhasesReportAStoppedRunAsFailed(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "phases.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hack", "phases.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte("quick:\n\ttrue\nslow:\n\tsleep 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file, not a buffer: the test reads it while the script writes it.
	logPath := filepath.Join(dir, "log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("bash", "hack/phases.sh", "quick", "slow")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(read(), "[phases] make slow") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	text := read()
	if err == nil {
		t.Errorf("phases.sh stopped by SIGTERM exited 0:\n%s", text)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "FAILED") || strings.Contains(last, "passed") {
		t.Errorf("the summary of a stopped run says %q, want FAILED:\n%s", last, text)
	}
	if !strings.Contains(text, "what failed in make slow") {
		t.Errorf("the summary does not name the stopped phase slow:\n%s", text)
	}
}
