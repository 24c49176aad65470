// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package dirs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openRoot(t *testing.T) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	return dir, root
}

func TestValidate(t *testing.T) {
	for rel, ok := range map[string]bool{
		"a": true, "a/b/c": true, "archived-x": true, ".hidden": true,
		"": false, "/a": false, "a/../b": false, "..": false, "./a": false, "a//b": false, "a/": false,
		"a\x00b": false, strings.Repeat("x", 256): false,
	} {
		err := Validate(rel)
		if (err == nil) != ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", rel, err, ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Validate(%q) error %v is not ErrInvalidPath", rel, err)
		}
	}
}

func TestCreateNestedAndExisting(t *testing.T) {
	dir, root := openRoot(t)
	created, err := Create(root, "a/b/c", ModeGroup)
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	st, err := os.Stat(filepath.Join(dir, "a/b/c"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != os.ModeDir|ModeGroup {
		t.Errorf("mode %s, want %s", st.Mode(), os.ModeDir|ModeGroup)
	}
	created, err = Create(root, "a/b/c", ModeShared)
	if err != nil || created {
		t.Errorf("second Create = %v, %v; want false, nil", created, err)
	}
	if empty, err := Empty(root, "a/b/c"); err != nil || !empty {
		t.Errorf("Empty = %v, %v", empty, err)
	}
	if empty, err := Empty(root, "a"); err != nil || empty {
		t.Errorf("Empty(a) = %v, %v", empty, err)
	}
}

func TestSymlinksAreNeverFollowed(t *testing.T) {
	dir, root := openRoot(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Even a link that stays inside the root is refused.
	if err := os.Symlink("in", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"out/x", "out", "alias/x", "alias"} {
		if _, err := Create(root, rel, ModeShared); !errors.Is(err, ErrSymlink) {
			t.Errorf("Create(%q) = %v, want ErrSymlink", rel, err)
		}
		if err := Remove(root, rel); !errors.Is(err, ErrSymlink) {
			t.Errorf("Remove(%q) = %v, want ErrSymlink", rel, err)
		}
		if _, err := Archive(root, rel, "pv"); !errors.Is(err, ErrSymlink) {
			t.Errorf("Archive(%q) = %v, want ErrSymlink", rel, err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote outside the root: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(root, "file/x", ModeShared); !errors.Is(err, ErrNotDir) {
		t.Errorf("Create under a file = %v, want ErrNotDir", err)
	}
}

func TestArchiveNestedAndCollision(t *testing.T) {
	dir, root := openRoot(t)
	for range 2 {
		if _, err := Create(root, "ns/team/data", ModeShared); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ns/team/data/f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Archive(root, "ns/team/data", "pvc-1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"ns/team/archived-data/f", "ns/team/archived-data-pvc-1/f"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("archive %s: %v", p, err)
		}
	}
	if to, err := Archive(root, "ns/team/data", "pvc-1"); err != nil || to != "" {
		t.Errorf("Archive of a missing directory = %q, %v; want success", to, err)
	}
	if _, err := Create(root, "ns/team/empty", ModeShared); err != nil {
		t.Fatal(err)
	}
	if to, err := Archive(root, "ns/team/empty", "pvc-2"); err != nil || to != "" {
		t.Errorf("Archive of an empty directory = %q, %v; want it removed", to, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "ns/team/empty")); !os.IsNotExist(err) {
		t.Errorf("empty directory not removed: %v", err)
	}
	if ArchiveName("a/b/c") != "a/b/archived-c" || ArchiveName("c") != "archived-c" {
		t.Errorf("ArchiveName: %q %q", ArchiveName("a/b/c"), ArchiveName("c"))
	}
}

func TestRemove(t *testing.T) {
	dir, root := openRoot(t)
	if _, err := Create(root, "a/b", ModeShared); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a/b/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Remove(root, "a/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a/b")); !os.IsNotExist(err) {
		t.Errorf("a/b still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err != nil {
		t.Errorf("parent removed: %v", err)
	}
	if err := Remove(root, "a/b"); err != nil {
		t.Errorf("Remove of a missing directory: %v", err)
	}
	if err := Remove(root, "x/y"); err != nil {
		t.Errorf("Remove below a missing parent: %v", err)
	}
}

func TestSetGroup(t *testing.T) {
	dir, root := openRoot(t)
	if _, err := Create(root, "v", ModeShared); err != nil {
		t.Fatal(err)
	}
	gid := os.Getegid()
	if err := SetGroup(root, "v", &gid); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "v"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != os.ModeDir|ModeGroup {
		t.Errorf("mode %s, want %s", st.Mode(), os.ModeDir|ModeGroup)
	}
	if err := SetGroup(root, "v", nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "v")); st.Mode() != os.ModeDir|ModeShared {
		t.Errorf("mode %s, want %s", st.Mode(), os.ModeDir|ModeShared)
	}
}

func TestGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown to other groups needs root; CI runs the tests as root")
		}
		t.Skip("chown to other groups needs root")
	}
	dir, root := openRoot(t)
	mk := func(name string, gid *int) {
		t.Helper()
		if _, err := Create(root, name, ModeShared); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "data"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := SetGroup(root, name, gid); err != nil {
			t.Fatal(err)
		}
	}
	g1, g2, g3 := 3001, 3002, 3003
	mk("pvc-a", &g1)
	mk("pvc-shared", nil) // no group of its own: not a record
	mk("pvc-b", &g2)
	mk("pvc-old", &g3)
	if _, err := Archive(root, "pvc-old", "x"); err != nil { // its volume is gone
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "pvc-a"), filepath.Join(dir, "pvc-link")); err != nil {
		t.Fatal(err)
	}
	got, err := Groups(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[g1] != "pvc-a" || got[g2] != "pvc-b" {
		t.Errorf("Groups = %v, want map[%d:pvc-a %d:pvc-b] (no shared, archived or linked entry)", got, g1, g2)
	}
}
