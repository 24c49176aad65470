// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nofollow makes and removes volume directories under a root
// without following a symbolic link in any component of their path.
//
// A volume's directory is written by pods, so any directory at or below a
// volume may be replaced by a link at any moment (a/x becomes a link to
// ../../other-tenant, or to /). Checking a path first (Lstat) and then
// using it is a race a pod can win, and os.Root follows links that stay
// inside the root. Here every component is opened with
// O_NOFOLLOW|O_DIRECTORY relative to the directory opened before it, and
// each operation acts on that open directory: a link found anywhere is an
// error (ErrSymlink), never a path taken. This works on every Linux kernel,
// so no openat2 fallback is needed. The root itself is the administrator's
// and is opened as given.
package nofollow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/pathpattern"
)

// Errors callers test with errors.Is.
var (
	// ErrSymlink: a component of the path is a symbolic link.
	ErrSymlink = errors.New("path goes through a symbolic link")
	// ErrNotDir: a component of the path is not a directory.
	ErrNotDir = errors.New("path component is not a directory")
	// ErrWritableParent: an existing parent of a new directory may be
	// written by others than this process (a volume, which pods write):
	// they could replace the new directory, or a parent, by a link.
	ErrWritableParent = errors.New("parent directory is writable by others")
	// ErrNotEmpty: MkdirOptions.MustBeEmpty and the directory holds files.
	ErrNotEmpty = errors.New("directory is not empty")
)

// openDir opens one path component as a directory, refusing a link.
const openDir = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// MkdirOptions say how MkdirAll makes a directory.
type MkdirOptions struct {
	// Mode is the permission bits of the directory, and its setgid,
	// setuid and sticky bits, set whatever the umask (on an existing
	// directory too).
	Mode fs.FileMode
	// ParentMode is the permission bits of missing parents it creates.
	ParentMode fs.FileMode
	// MustBeEmpty refuses an existing directory that holds files.
	MustBeEmpty bool
	// LeaveExisting sets Mode only on a directory it creates, not on one
	// that exists (reused data whose mode its owner chose).
	LeaveExisting bool
	// AnyParents accepts existing parents whatever their owner and mode
	// (an NFS share whose directories its administrator made, or that
	// squashes root): the caller must then keep volumes from nesting by
	// itself (pathpattern.InUse). Links are refused either way.
	AnyParents bool
}

// MkdirAll makes rel, a relative slash path (pathpattern.ValidateRelative),
// under root, with any missing parents, and reports whether it created rel.
// An existing rel that is a directory is not an error.
func MkdirAll(root, rel string, o MkdirOptions) (created bool, err error) {
	if err := pathpattern.ValidateRelative(rel); err != nil {
		return false, err
	}
	parent, leaf, err := openParent(root, rel, &o)
	if err != nil {
		return false, err
	}
	defer closeFD(parent)
	// The mode asked for, less the umask, until fchmod below: should the
	// process die in between, a later call finds it usable as far as the
	// umask allows, or sets it.
	err = unix.Mkdirat(parent, leaf, uint32(o.Mode.Perm()))
	created = err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return false, fmt.Errorf("creating %s under %s: %w", rel, root, err)
	}
	fd, err := openAt(parent, leaf, rel)
	if err != nil {
		return created, err
	}
	dir := os.NewFile(uintptr(fd), rel) //nolint:gosec // a file descriptor is never negative here
	defer func() { _ = dir.Close() }()
	if !created && o.MustBeEmpty {
		if err := requireEmpty(dir, root, rel); err != nil {
			return false, err
		}
	}
	// Mkdirat's mode is filtered by the umask; fchmod is not, and acts on
	// the directory opened, not on whatever the path names by now.
	if created || !o.LeaveExisting {
		if err := Fchmod(fd, o.Mode); err != nil {
			return created, fmt.Errorf("setting the mode of %s under %s: %w", rel, root, err)
		}
	}
	return created, nil
}

// RemoveAll removes rel under root and everything in it; a missing rel (or
// parent) is success. A link at rel or below it is removed as a link;
// a link in a parent of rel is ErrSymlink and nothing is removed.
func RemoveAll(root, rel string) error {
	return inExistingParent(root, rel, func(parent int, leaf string) error {
		return removeEntry(parent, leaf, rel)
	})
}

// inExistingParent runs f on the opened parent of rel under root and rel's
// last component; a missing parent is success without calling f.
func inExistingParent(root, rel string, f func(parent int, leaf string) error) error {
	if err := pathpattern.ValidateRelative(rel); err != nil {
		return err
	}
	parent, leaf, err := openParent(root, rel, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer closeFD(parent)
	return f(parent, leaf)
}

// OpenParent opens the directory that holds rel's last component under
// root, each component reached without following a link, and returns its
// file descriptor (the caller closes it) with that last component. It is
// for operations this package does not make, such as a filesystem's own
// ioctls on a directory, which must act on the directory reached here and
// not on whatever the path names by the time they run. With o, missing
// parents are made as MkdirAll makes them (o.ParentMode; existing ones
// must not be writable by others unless o.AnyParents); with o nil, a
// missing parent is fs.ErrNotExist.
func OpenParent(root, rel string, o *MkdirOptions) (fd int, leaf string, err error) {
	if err := pathpattern.ValidateRelative(rel); err != nil {
		return -1, "", err
	}
	return openParent(root, rel, o)
}

// Open opens rel under root as a directory without following a link in
// any component, rel itself included (ErrSymlink, ErrNotDir; a missing
// component is fs.ErrNotExist), and returns its file descriptor, which the
// caller closes.
func Open(root, rel string) (int, error) {
	parent, leaf, err := OpenParent(root, rel, nil)
	if err != nil {
		return -1, err
	}
	defer closeFD(parent)
	return openAt(parent, leaf, rel)
}

// Check reports whether rel under root is reached without a link: each
// existing component a directory, none a link (ErrSymlink, ErrNotDir). A
// missing component ends the walk without error: what a program then
// creates there is a real directory. It is for paths another program
// works on next (a script of the administrator's), so it is only as good
// as nobody else can change the parents in between.
func Check(root, rel string) error { return check(root, rel, false) }

// CheckEmpty is Check, and an existing rel must hold nothing (ErrNotEmpty):
// the rule MkdirOptions.MustBeEmpty applies, for a directory another
// program makes next.
func CheckEmpty(root, rel string) error { return check(root, rel, true) }

func check(root, rel string, mustBeEmpty bool) error {
	return inExistingParent(root, rel, func(parent int, leaf string) error {
		fd, err := openAt(parent, leaf, rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		dir := os.NewFile(uintptr(fd), rel) //nolint:gosec // a file descriptor is never negative here
		defer func() { _ = dir.Close() }()
		if mustBeEmpty {
			return requireEmpty(dir, root, rel)
		}
		return nil
	})
}

// requireEmpty is ErrNotEmpty if dir, rel under root, holds anything: a
// directory MustBeEmpty asks about is one a claim's values named
// (gate.HandOutDirectory).
func requireEmpty(dir *os.File, root, rel string) error {
	names, err := dir.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading %s under %s: %w", rel, root, err)
	}
	if err := gate.HandOutDirectory(filepath.Join(root, rel), false, len(names)); err != nil {
		return fmt.Errorf("%w: %w", ErrNotEmpty, err)
	}
	return nil
}

// openParent opens the directory holding rel's last component, one
// component at a time without following links, and returns it with that
// last component. With o, missing parents are made and each existing one
// must not be writable by others; without, a missing parent is
// fs.ErrNotExist.
func openParent(root, rel string, o *MkdirOptions) (fd int, leaf string, err error) {
	fd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("opening %s: %w", root, err)
	}
	comps := strings.Split(rel, "/")
	for i, c := range comps[:len(comps)-1] {
		at := strings.Join(comps[:i+1], "/")
		made := false
		if o != nil {
			err := unix.Mkdirat(fd, c, uint32(o.ParentMode.Perm()))
			made = err == nil
			if err != nil && !errors.Is(err, unix.EEXIST) {
				closeFD(fd)
				return -1, "", fmt.Errorf("creating %s under %s: %w", at, root, err)
			}
		}
		next, err := openAt(fd, c, at)
		closeFD(fd)
		if err != nil {
			return -1, "", err
		}
		fd = next
		if o == nil {
			continue
		}
		if made {
			err = Fchmod(fd, o.ParentMode)
		} else if !o.AnyParents {
			err = checkParent(fd, at)
		}
		if err != nil {
			closeFD(fd)
			return -1, "", err
		}
	}
	return fd, comps[len(comps)-1], nil
}

// checkParent refuses an existing parent that others may write.
func checkParent(fd int, at string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: %s (mode %#o)", ErrWritableParent, at, st.Mode&0o7777)
	}
	if int64(st.Uid) != int64(os.Geteuid()) {
		return fmt.Errorf("%w: %s belongs to uid %d", ErrWritableParent, at, st.Uid)
	}
	return nil
}

// openAt opens name in dir as a directory, naming what stands there
// instead when it is a link or no directory.
func openAt(dir int, name, at string) (int, error) {
	fd, err := unix.Openat(dir, name, openDir, 0)
	if err == nil {
		return fd, nil
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if serr := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, fmt.Errorf("%w: %s", ErrSymlink, at)
		}
		return -1, fmt.Errorf("%w: %s", ErrNotDir, at)
	}
	if errors.Is(err, unix.ENOENT) {
		return -1, fmt.Errorf("%s: %w", at, fs.ErrNotExist)
	}
	return -1, fmt.Errorf("opening %s: %w", at, err)
}

// removeEntry removes name from dir: a directory with its contents, and
// anything else (a link included) as itself.
func removeEntry(dir int, name, at string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("removing %s: %w", at, err)
	}
	fd, err := unix.Openat(dir, name, openDir, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		// Replaced by a link or a file since: remove that, unfollowed.
		return removeEntry(dir, name, at)
	case err != nil:
		return fmt.Errorf("opening %s: %w", at, err)
	}
	if err := removeContents(fd, at); err != nil {
		return err
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s: %w", at, err)
	}
	return nil
}

// removeContents empties the directory fd, which it closes. Entries that
// appear meanwhile (a pod still writing) are read again a few times.
func removeContents(fd int, at string) error {
	dir := os.NewFile(uintptr(fd), at) //nolint:gosec // a file descriptor is never negative here
	defer func() { _ = dir.Close() }()
	for range 8 {
		if _, err := dir.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("reading %s: %w", at, err)
		}
		names, err := dir.Readdirnames(-1)
		if err != nil {
			return fmt.Errorf("reading %s: %w", at, err)
		}
		if len(names) == 0 {
			return nil
		}
		for _, n := range names {
			if err := removeEntry(fd, n, at+"/"+n); err != nil {
				return err
			}
		}
	}
	return nil
}

// Rename renames rel's last component to newName in the same directory,
// which is reached without following links; it refuses to replace an
// existing newName. A link at rel is renamed as a link.
func Rename(root, rel, newName string) error {
	if err := pathpattern.ValidateRelative(rel); err != nil {
		return err
	}
	if err := pathpattern.ValidateRelative(newName); err != nil || strings.Contains(newName, "/") {
		return fmt.Errorf("new name %q must be a plain file name", newName)
	}
	parent, leaf, err := openParent(root, rel, nil)
	if err != nil {
		return err
	}
	defer closeFD(parent)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, newName, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return fmt.Errorf("renaming %s to %s: %w", rel, newName, fs.ErrExist)
	} else if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("renaming %s to %s: %w", rel, newName, err)
	}
	if err := unix.Renameat(parent, leaf, parent, newName); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", rel, newName, err)
	}
	return nil
}

// Fchmod sets the mode of the file fd is open on to m's permission,
// setuid, setgid and sticky bits, whatever the umask: for a directory
// reached with OpenParent or Open and made by other means (an ioctl).
func Fchmod(fd int, m fs.FileMode) error { return unix.Fchmod(fd, unixMode(m)) }

// unixMode is m's permission, setuid, setgid and sticky bits for chmod.
func unixMode(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		mode |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		mode |= unix.S_ISVTX
	}
	return mode
}

func closeFD(fd int) { _ = unix.Close(fd) }
