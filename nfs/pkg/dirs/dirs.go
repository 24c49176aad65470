// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dirs creates, archives and removes volume directories under a root
// directory without ever leaving it: creating, removing and renaming go
// through lib/nofollow, which opens every component with O_NOFOLLOW from
// the one before, so that no symlink is followed even inside the root (two
// claims must never share data through a link, even one swapped in while
// the operation runs); existing components are also checked with Lstat
// first, to name what is wrong.
package dirs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/kubeprov/external-storage/lib/nofollow"
	"github.com/kubeprov/external-storage/lib/pathpattern"
)

// Errors callers test with errors.Is.
var (
	// ErrInvalidPath: the relative path is empty, absolute, or has an empty,
	// "." or ".." component.
	ErrInvalidPath = pathpattern.ErrInvalidPath
	// ErrSymlink: a component of the path is a symbolic link.
	ErrSymlink = nofollow.ErrSymlink
	// ErrNotDir: a component of the path is not a directory.
	ErrNotDir = nofollow.ErrNotDir
)

// Modes of a new volume directory: everybody may write when no gid is given
// (as both former provisioners did); with a gid, only owner and group, and
// the setgid bit makes new files inherit the group.
const (
	ModeShared = os.FileMode(0o777)
	ModeGroup  = os.ModeSetgid | os.FileMode(0o770)
	// modeParent is for intermediate directories of nested paths.
	modeParent = os.FileMode(0o755)
)

// Validate checks that rel is a clean relative slash path inside the root
// (lib/pathpattern's rules: its errors wrap ErrInvalidPath).
func Validate(rel string) error { return pathpattern.ValidateRelative(rel) }

// checkParents checks that every existing proper prefix of rel is a
// directory, not a symlink; it returns the index of the first missing one
// (len(components)-1 when all parents exist).
func checkParents(root *os.Root, comps []string) (int, error) {
	for i := range len(comps) - 1 {
		p := path.Join(comps[:i+1]...)
		st, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return i, nil
		}
		if err != nil {
			return 0, err
		}
		if err := isPlainDir(p, st); err != nil {
			return 0, err
		}
	}
	return len(comps) - 1, nil
}

func isPlainDir(p string, st fs.FileInfo) error {
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %q", ErrSymlink, p)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %q", ErrNotDir, p)
	}
	return nil
}

// Create makes directory rel under root, with any missing parents. It
// reports whether it created rel; an existing rel that is a plain directory
// is not an error (the caller decides whether it may be used). Existing
// parents may have any mode: the share's administrator may have made them,
// and Provisioner keeps volumes from nesting by their paths.
func Create(root *os.Root, rel string, mode os.FileMode) (bool, error) {
	if err := Validate(rel); err != nil {
		return false, err
	}
	if _, err := checkParents(root, strings.Split(rel, "/")); err != nil {
		return false, err
	}
	return nofollow.MkdirAll(root.Name(), rel, nofollow.MkdirOptions{Mode: mode, ParentMode: modeParent, AnyParents: true, LeaveExisting: true})
}

// SetGroup gives rel the group gid, the setgid bit and group access
// (ModeGroup); nil leaves the group and makes rel writable by everybody.
func SetGroup(root *os.Root, rel string, gid *int) error {
	if gid == nil {
		return SetOwner(root, rel, nil, nil, ModeShared)
	}
	return SetOwner(root, rel, nil, gid, ModeGroup)
}

// SetOwner gives rel the user uid and group gid (nil leaves each as it is)
// and then mode.
func SetOwner(root *os.Root, rel string, uid, gid *int, mode os.FileMode) error {
	if uid != nil || gid != nil {
		u, g := -1, -1
		if uid != nil {
			u = *uid
		}
		if gid != nil {
			g = *gid
		}
		if err := root.Lchown(rel, u, g); err != nil {
			return err
		}
	}
	// chown clears the setgid bit: set the mode afterwards.
	return root.Chmod(rel, mode)
}

// Empty reports whether directory rel has no entries.
func Empty(root *os.Root, rel string) (bool, error) {
	f, err := root.Open(rel)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// Exists reports whether rel exists, after checking that no component of it
// is a symlink.
func Exists(root *os.Root, rel string) (bool, error) {
	if err := Validate(rel); err != nil {
		return false, err
	}
	comps := strings.Split(rel, "/")
	first, err := checkParents(root, comps)
	if err != nil {
		return false, err
	}
	if first < len(comps)-1 {
		return false, nil
	}
	st, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, isPlainDir(rel, st)
}

// Remove deletes rel and everything in it; a missing rel is success.
func Remove(root *os.Root, rel string) error {
	ok, err := Exists(root, rel)
	if err != nil || !ok {
		return err
	}
	return nofollow.RemoveAll(root.Name(), rel)
}

// Groups lists the groups of the volume directories directly in root, by
// gid: directories (never links) with the setgid bit SetGroup gives, except
// archived ones, whose volumes are gone. Only the provisioner sets these
// groups, so they are the record of which volume has which group.
func Groups(root *os.Root) (map[int]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	groups := map[int]string{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ArchiveName("")) {
			continue
		}
		st, err := root.Lstat(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !st.IsDir() || st.Mode()&os.ModeSetgid == 0 || !ok {
			continue
		}
		groups[int(sys.Gid)] = e.Name()
	}
	return groups, nil
}

// ArchiveName is the name rel gets when archived: its last component gets
// the prefix "archived-", in the same parent, so nested paths archive in
// place ("a/b/c" becomes "a/b/archived-c").
func ArchiveName(rel string) string {
	dir, leaf := path.Split(rel)
	return dir + "archived-" + leaf
}

// Archive renames rel to ArchiveName(rel), or, when that is taken by an
// earlier archive, to ArchiveName(rel)+"-"+suffix. It returns the new name;
// a missing rel is success with "". An empty rel is removed instead: there
// is nothing to keep, and a volume made again only to be deleted (as after
// a restart that replays an old operation) must not leave empty archives.
func Archive(root *os.Root, rel, suffix string) (string, error) {
	ok, err := Exists(root, rel)
	if err != nil || !ok {
		return "", err
	}
	if empty, err := Empty(root, rel); err != nil {
		return "", err
	} else if empty {
		return "", nofollow.RemoveAll(root.Name(), rel)
	}
	for _, to := range []string{ArchiveName(rel), ArchiveName(rel) + "-" + suffix} {
		err := nofollow.Rename(root.Name(), rel, path.Base(to))
		if !errors.Is(err, fs.ErrExist) {
			return to, err
		}
	}
	return "", fmt.Errorf("cannot archive %q: %q and %q already exist", rel, ArchiveName(rel), ArchiveName(rel)+"-"+suffix)
}
