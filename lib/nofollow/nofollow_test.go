// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nofollow

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func mkdir(t *testing.T, p string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestMkdirAllMakesParentsAndSetsModes(t *testing.T) {
	root := t.TempDir()
	created, err := MkdirAll(root, "ns/claim/data", MkdirOptions{Mode: 0o777, ParentMode: 0o755})
	if err != nil || !created {
		t.Fatalf("MkdirAll = %v, %v", created, err)
	}
	for p, want := range map[string]fs.FileMode{"ns": 0o755, "ns/claim": 0o755, "ns/claim/data": 0o777} {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %#o", p, st.Mode(), err, want)
		}
	}
	created, err = MkdirAll(root, "ns/claim/data", MkdirOptions{Mode: 0o777, ParentMode: 0o755})
	if err != nil || created {
		t.Errorf("again = %v, %v; want an existing directory", created, err)
	}
	write(t, filepath.Join(root, "ns/claim/data/f"))
	if _, err := MkdirAll(root, "ns/claim/data", MkdirOptions{Mode: 0o777, MustBeEmpty: true}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("MustBeEmpty on a directory with files = %v", err)
	}
}

// The attack of issue 25: a tenant replaces a parent of another volume's
// directory with a link, to another tenant's directory inside the root or
// to a host directory outside it.
func TestLinksAreNeverFollowed(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mkdir(t, filepath.Join(root, "other-tenant/data"), 0o777)
	write(t, filepath.Join(root, "other-tenant/data/secret"))
	mkdir(t, filepath.Join(outside, "data"), 0o755)
	write(t, filepath.Join(outside, "data/passwd"))
	mkdir(t, filepath.Join(root, "a"), 0o755)
	for name, target := range map[string]string{"inside": "../other-tenant", "outside": outside} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(root, "a/x")
			_ = os.Remove(link)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			if _, err := MkdirAll(root, "a/x/data/new", MkdirOptions{Mode: 0o777, ParentMode: 0o755}); !errors.Is(err, ErrSymlink) {
				t.Errorf("MkdirAll through a link = %v; want ErrSymlink", err)
			}
			if err := RemoveAll(root, "a/x/data"); !errors.Is(err, ErrSymlink) {
				t.Errorf("RemoveAll through a link = %v; want ErrSymlink", err)
			}
			for _, rel := range []string{"a/x/data/new", "a/x"} {
				if err := Check(root, rel); !errors.Is(err, ErrSymlink) {
					t.Errorf("Check(%s) through a link = %v; want ErrSymlink", rel, err)
				}
			}
			if err := Check(root, "a/missing/new"); err != nil {
				t.Errorf("Check of a path not made yet = %v; want nil", err)
			}
			if exists(filepath.Join(root, "other-tenant/data/new")) || exists(filepath.Join(outside, "data/new")) {
				t.Error("a directory was made where the link points")
			}
			if !exists(filepath.Join(root, "other-tenant/data/secret")) || !exists(filepath.Join(outside, "data/passwd")) {
				t.Error("what the link points at was removed")
			}
		})
	}
}

func TestRemoveAllRemovesLinksAsLinks(t *testing.T) {
	root := t.TempDir()
	victim := t.TempDir()
	write(t, filepath.Join(victim, "keep"))
	mkdir(t, filepath.Join(root, "vol/sub"), 0o777)
	write(t, filepath.Join(root, "vol/sub/f"))
	if err := os.Symlink(victim, filepath.Join(root, "vol/sub/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(root, "leaf")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"vol", "leaf", "missing", "missing/x"} {
		if err := RemoveAll(root, rel); err != nil {
			t.Errorf("RemoveAll(%s) = %v", rel, err)
		}
		if exists(filepath.Join(root, rel)) {
			t.Errorf("%s is still there", rel)
		}
	}
	if !exists(filepath.Join(victim, "keep")) {
		t.Error("removed what a link points at")
	}
}

func TestMkdirAllRefusesParentsOthersWrite(t *testing.T) {
	root := t.TempDir()
	// Another volume's directory: pods write it.
	mkdir(t, filepath.Join(root, "a"), 0o777)
	_, err := MkdirAll(root, "a/x/data", MkdirOptions{Mode: 0o777, ParentMode: 0o755})
	if !errors.Is(err, ErrWritableParent) {
		t.Errorf("MkdirAll inside a directory others write = %v; want ErrWritableParent", err)
	}
	if exists(filepath.Join(root, "a/x")) {
		t.Error("made a directory inside it")
	}
	// The volume itself may be writable: it is what pods get.
	if _, err := MkdirAll(root, "a", MkdirOptions{Mode: 0o777}); err != nil {
		t.Errorf("existing writable leaf: %v", err)
	}
	mkdir(t, filepath.Join(root, "f"), 0o755)
	write(t, filepath.Join(root, "f/file"))
	if _, err := MkdirAll(root, "f/file/x", MkdirOptions{Mode: 0o777}); !errors.Is(err, ErrNotDir) {
		t.Errorf("through a file = %v; want ErrNotDir", err)
	}
}

func TestModeBitsAndRename(t *testing.T) {
	root := t.TempDir()
	if _, err := MkdirAll(root, "g", MkdirOptions{Mode: fs.ModeSetgid | 0o770}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(root, "g")); err != nil || st.Mode() != fs.ModeDir|fs.ModeSetgid|0o770 {
		t.Errorf("mode %v, %v; want setgid 0770", st.Mode(), err)
	}
	mkdir(t, filepath.Join(root, "a/v"), 0o755)
	if err := Rename(root, "a/v", "archived-v"); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(root, "a/archived-v")) || exists(filepath.Join(root, "a/v")) {
		t.Error("not renamed")
	}
	mkdir(t, filepath.Join(root, "a/v"), 0o755)
	if err := Rename(root, "a/v", "archived-v"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Rename onto an existing name = %v; want fs.ErrExist", err)
	}
	victim := t.TempDir()
	mkdir(t, filepath.Join(victim, "v"), 0o755)
	if err := os.Symlink(victim, filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	if err := Rename(root, "l/v", "moved"); !errors.Is(err, ErrSymlink) {
		t.Errorf("Rename through a link = %v; want ErrSymlink", err)
	}
	if !exists(filepath.Join(victim, "v")) {
		t.Error("renamed what the link points at")
	}
}

func TestOpenParentAndOpenNeverFollowLinks(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mkdir(t, filepath.Join(root, "a"), 0o755)
	if err := os.Symlink(outside, filepath.Join(root, "a/x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenParent(root, "a/x/new", &MkdirOptions{ParentMode: 0o755}); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenParent through a link = %v; want ErrSymlink", err)
	}
	if _, err := Open(root, "a/x"); !errors.Is(err, ErrSymlink) {
		t.Errorf("Open of a link = %v; want ErrSymlink", err)
	}
	if _, err := Open(root, "a/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing directory = %v; want fs.ErrNotExist", err)
	}
	if _, _, err := OpenParent(root, "b/c/d", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenParent without options, parent missing = %v; want fs.ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something was made through the link: %v", entries)
	}

	fd, leaf, err := OpenParent(root, "b/c/d", &MkdirOptions{ParentMode: 0o750})
	if err != nil {
		t.Fatalf("OpenParent = %v", err)
	}
	defer func() { _ = syscall.Close(fd) }()
	if leaf != "d" {
		t.Errorf("leaf = %q; want d", leaf)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(filepath.Join(root, "b/c"))
	if err != nil || st.Ino != want.Sys().(*syscall.Stat_t).Ino || want.Mode().Perm() != 0o750 {
		t.Errorf("OpenParent opened inode %d; want b/c (%v, %v) with mode 0750", st.Ino, want, err)
	}
	if exists(filepath.Join(root, "b/c/d")) {
		t.Error("OpenParent made the last component")
	}
}
