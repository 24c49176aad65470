// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeXFSQuota puts an xfs_quota script on PATH that logs its arguments and
// answers "state -p" with the given enforcement. The kernel here cannot
// enable XFS project quota, so the real tool cannot be exercised.
func fakeXFSQuota(t *testing.T, enforcement string) string {
	t.Helper()
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	script := `#!/bin/sh
printf '%s|' "$@" >> "` + log + `"
echo >> "` + log + `"
case "$3" in
"state -p") printf 'Project quota state on /export (/dev/sdb)\n  Accounting: ON\n  Enforcement: ` + enforcement + `\n' ;;
"limit -p bhard=0 13") echo "xfs_quota: cannot find project 13" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "xfs_quota"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

func calls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestXFS(t *testing.T) {
	log := fakeXFSQuota(t, "ON")
	ctx := context.Background()
	q, err := NewXFS(ctx, "/export")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Set(ctx, "/export/pvc-1", 7, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := q.Clear(ctx, "/export/pvc-1", 7); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-x|-c|state -p|/export|",
		"-x|-c|project -s -p /export/pvc-1 7|/export|",
		"-x|-c|limit -p bhard=1073741824 7|/export|",
		"-x|-c|limit -p bhard=0 7|/export|",
		"-x|-c|project -C -p /export/pvc-1 7|/export|",
	}
	if got := calls(t, log); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("xfs_quota calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := q.Set(ctx, "/export/pvc-2", 8, 0); err == nil {
		t.Error("Set with 0 bytes succeeded")
	}
	err = q.Clear(ctx, "/export/pvc-13", 13)
	if err == nil || !strings.Contains(err.Error(), "cannot find project 13") {
		t.Errorf("Clear when xfs_quota fails: %v; want its message", err)
	}
}

func TestXFSNotEnforced(t *testing.T) {
	fakeXFSQuota(t, "OFF")
	_, err := NewXFS(context.Background(), "/export")
	if err == nil || !strings.Contains(err.Error(), "prjquota") {
		t.Errorf("NewXFS without enforcement: %v; want advice about prjquota", err)
	}
}

func TestXFSMissingTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := NewXFS(context.Background(), "/export"); err == nil || !strings.Contains(err.Error(), "--enable-xfs-quota") {
		t.Errorf("NewXFS without xfs_quota: %v", err)
	}
}
