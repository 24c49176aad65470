// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package quota makes a hostpath volume a btrfs subvolume whose qgroup
// limits the bytes it references to the claim's request, so that a pod
// writing past its claim gets EDQUOT ("disk quota exceeded") instead of
// filling the node's disk. A plain directory has no size of its own; a
// subvolume has, and its level-0 qgroup (0/<subvolume id>) counts what it
// holds.
//
// It talks to the kernel with btrfs ioctls only, so the provisioner's image
// needs no btrfs-progs. Paths are reached as lib/nofollow reaches them: no
// symbolic link is followed in any component, and every ioctl acts on a
// directory already opened that way, never on a path looked up again.
// Setting limits and reading the quota tree need CAP_SYS_ADMIN (root).
package quota

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kubeprov/external-storage/lib/nofollow"
)

// KindBtrfs is Support.Kind for a btrfs filesystem with quotas enabled.
const KindBtrfs = "btrfs"

// Errors callers test with errors.Is.
var (
	// ErrNotSubvolume: a directory stands where a subvolume is expected
	// (one made before limits were enabled, or by someone else).
	ErrNotSubvolume = errors.New("not a btrfs subvolume")
	// ErrUnsupported: the filesystem cannot limit a volume (Probe's Reason
	// says why).
	ErrUnsupported = errors.New("size limits unsupported")
)

// Support says whether a path's filesystem can limit a volume's size.
type Support struct {
	// Kind is "btrfs" when it can, "" when it cannot.
	Kind string
	// Reason, when it cannot, is a sentence an administrator can act on.
	Reason string
}

// Probe tells whether volumes under dir can be limited: dir must be on
// btrfs with quotas enabled. An error means it could not tell (dir is
// missing, or reading the quota tree was refused without CAP_SYS_ADMIN).
func Probe(dir string) (Support, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Support{}, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer closeFD(fd)
	return probeFD(fd, dir)
}

func probeFD(fd int, dir string) (Support, error) {
	t, err := fsType(fd)
	if err != nil {
		return Support{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if t != unix.BTRFS_SUPER_MAGIC {
		return Support{Reason: fmt.Sprintf("%s is %s, which has no per-directory limits this provisioner can set", dir, fsName(t))}, nil
	}
	on, err := quotaOn(fd)
	if err != nil {
		return Support{}, fmt.Errorf("reading the btrfs quota status of %s (needs CAP_SYS_ADMIN): %w", dir, err)
	}
	if !on {
		return Support{Reason: fmt.Sprintf("btrfs quotas are off on %s: run `btrfs quota enable %s`", dir, dir)}, nil
	}
	return Support{Kind: KindBtrfs}, nil
}

// requireSupport is ErrUnsupported, with Probe's reason, unless fd's
// filesystem can limit volumes: a subvolume made on a filesystem without
// quotas would hold data no limit ever applies to.
func requireSupport(fd int, dir string) error {
	s, err := probeFD(fd, dir)
	if err != nil {
		return err
	}
	if s.Kind == "" {
		return fmt.Errorf("%w: %s", ErrUnsupported, s.Reason)
	}
	return nil
}

// Create makes rel under root a btrfs subvolume that may reference at
// most limitBytes, with mode set whatever the umask. Missing parents are
// made as nofollow.MkdirAll makes them (mode 0755; existing ones must not
// be writable by others); the subvolume is created and limited through
// the parent's descriptor, reached without following links. An existing
// subvolume at rel is success once its mode and limit are set (Provision
// is repeated after restarts, and a crash may have come between creating
// and limiting it); an existing directory that is no subvolume is
// ErrNotSubvolume, and nothing is made when quotas are off.
func Create(root, rel string, mode fs.FileMode, limitBytes int64) error {
	full := filepath.Join(root, rel)
	if limitBytes <= 0 {
		return fmt.Errorf("creating volume %s: limit %d bytes: must be positive", full, limitBytes)
	}
	parent, leaf, err := nofollow.OpenParent(root, rel, &nofollow.MkdirOptions{ParentMode: 0o755})
	if err != nil {
		return fmt.Errorf("creating volume %s: %w", full, err)
	}
	defer closeFD(parent)
	if err := requireSupport(parent, filepath.Dir(full)); err != nil {
		return fmt.Errorf("creating volume %s: %w", full, err)
	}
	if err := createSubvolume(parent, leaf); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("creating btrfs subvolume %s: %w", full, err)
	}
	fd, err := openSubvolume(parent, leaf, full)
	if err != nil {
		return err
	}
	defer closeFD(fd)
	// The subvolume's root directory is made with the process's umask
	// applied; fchmod is not filtered by it.
	if err := nofollow.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", full, err)
	}
	return limit(fd, full, limitBytes)
}

// SetLimit sets the referenced-bytes limit of the subvolume rel under root
// to limitBytes: raised when its claim is expanded. Lowering it below what
// the volume holds makes every further write fail, so the caller decides.
func SetLimit(root, rel string, limitBytes int64) error {
	full := filepath.Join(root, rel)
	if limitBytes <= 0 {
		return fmt.Errorf("limiting volume %s: limit %d bytes: must be positive", full, limitBytes)
	}
	fd, err := openExistingSubvolume(root, rel)
	if err != nil {
		return err
	}
	defer closeFD(fd)
	return limit(fd, full, limitBytes)
}

// limit sets the limit of the subvolume fd, named full in errors.
func limit(fd int, full string, limitBytes int64) error {
	id, err := subvolumeID(fd)
	if err != nil {
		return fmt.Errorf("reading the subvolume id of %s: %w", full, err)
	}
	if err := setQgroupLimit(fd, id, uint64(limitBytes)); err != nil { //nolint:gosec // callers check limitBytes > 0
		return fmt.Errorf("setting the limit of %s (qgroup 0/%d) to %d bytes: %w", full, id, limitBytes, err)
	}
	return nil
}

// Used is the bytes the subvolume rel under root references: its data and
// its own metadata, what the limit is compared with. btrfs updates the
// number when it commits a transaction (every 30 s by default, the commit=
// mount option, a sync, or an fsync that commits), so it may lag writes
// by up to that; a new subvolume reads 0.
// While quotas are marked inconsistent (after enabling them on a full
// filesystem, until their rescan ends) it is wrong.
func Used(root, rel string) (int64, error) {
	full := filepath.Join(root, rel)
	fd, err := openExistingSubvolume(root, rel)
	if err != nil {
		return 0, err
	}
	defer closeFD(fd)
	id, err := subvolumeID(fd)
	if err != nil {
		return 0, fmt.Errorf("reading the subvolume id of %s: %w", full, err)
	}
	n, _, err := qgroupCounts(fd, id)
	if err != nil {
		return 0, fmt.Errorf("reading the usage of %s (qgroup 0/%d): %w", full, id, err)
	}
	return int64(n), nil //nolint:gosec // a filesystem holds less than 8 EiB
}

// Remove deletes the subvolume rel under root with everything in it, and
// its qgroup. A missing rel (or parent) is success; a directory that is no
// subvolume is ErrNotSubvolume and is left (remove it as a directory); a
// link in any component is nofollow.ErrSymlink and nothing is removed.
// The space comes back once btrfs's cleaner thread has dropped the
// subvolume, shortly after Remove returns.
func Remove(root, rel string) error {
	full := filepath.Join(root, rel)
	parent, leaf, err := nofollow.OpenParent(root, rel, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing volume %s: %w", full, err)
	}
	defer closeFD(parent)
	fd, err := openSubvolume(parent, leaf, full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	id, err := subvolumeID(fd)
	closeFD(fd)
	if err != nil {
		return fmt.Errorf("reading the subvolume id of %s: %w", full, err)
	}
	if err := destroySubvolume(parent, leaf); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting btrfs subvolume %s: %w", full, err)
	}
	return dropQgroup(parent, id, full)
}

// dropQgroup removes qgroup 0/id of a deleted subvolume once it counts no
// bytes. Right after the delete it still counts the subvolume's until the
// cleaner thread has dropped it and a transaction committed: recent
// kernels then remove it themselves, and refuse to remove it before
// (EBUSY; both seen on 6.18); some earlier ones removed it with a warning
// and marked every qgroup's numbers inconsistent until a rescan. So it is
// removed only when empty, and otherwise left to the kernel; a kernel that
// leaves it keeps an empty qgroup of an id never used again, which limits
// nothing.
func dropQgroup(fd int, id uint64, full string) error {
	rfer, excl, err := qgroupCounts(fd, id)
	switch {
	case errors.Is(err, errNoItem), errors.Is(err, unix.ENOENT):
		return nil // gone already, or quotas off
	case err != nil:
		return fmt.Errorf("reading qgroup 0/%d of deleted volume %s: %w", id, full, err)
	case rfer != 0 || excl != 0:
		return nil
	}
	err = removeQgroup(fd, id)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("removing qgroup 0/%d of deleted volume %s: %w", id, full, err)
	}
	return nil
}

// IsSubvolume reports whether rel under root is a btrfs subvolume, reached
// without following links. A missing rel is false without error.
func IsSubvolume(root, rel string) (bool, error) {
	fd, err := nofollow.Open(root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", filepath.Join(root, rel), err)
	}
	defer closeFD(fd)
	return isSubvolume(fd)
}

// isSubvolume: fd is the root directory of a btrfs subvolume, whose inode
// number is always BTRFS_FIRST_FREE_OBJECTID.
func isSubvolume(fd int) (bool, error) {
	t, err := fsType(fd)
	if err != nil || t != unix.BTRFS_SUPER_MAGIC {
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Ino == firstFreeObjectID && st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// openExistingSubvolume opens the subvolume rel under root without
// following links.
func openExistingSubvolume(root, rel string) (int, error) {
	full := filepath.Join(root, rel)
	fd, err := nofollow.Open(root, rel)
	if err != nil {
		return -1, fmt.Errorf("opening volume %s: %w", full, err)
	}
	if err := requireSubvolume(fd, full); err != nil {
		closeFD(fd)
		return -1, err
	}
	return fd, nil
}

// openSubvolume opens name in dir, which must be a subvolume: a link is
// nofollow.ErrSymlink, never followed; a missing one is fs.ErrNotExist.
func openSubvolume(dir int, name, full string) (int, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, fmt.Errorf("%s: %w", full, fs.ErrNotExist)
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		return -1, notDirError(dir, name, full)
	case err != nil:
		return -1, fmt.Errorf("opening %s: %w", full, err)
	}
	if err := requireSubvolume(fd, full); err != nil {
		closeFD(fd)
		return -1, err
	}
	return fd, nil
}

// notDirError names what stands at name in dir instead of a directory.
func notDirError(dir int, name, full string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%w: %s", nofollow.ErrSymlink, full)
	}
	return fmt.Errorf("%w: %s", nofollow.ErrNotDir, full)
}

// requireSubvolume is ErrNotSubvolume unless fd is a subvolume.
func requireSubvolume(fd int, full string) error {
	ok, err := isSubvolume(fd)
	if err != nil {
		return fmt.Errorf("checking %s: %w", full, err)
	}
	if !ok {
		return fmt.Errorf("%s exists and is %w (made before size limits were on, or by someone else)", full, ErrNotSubvolume)
	}
	return nil
}

// fsType is the statfs magic number of fd's filesystem.
func fsType(fd int) (uint32, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return 0, err
	}
	// f_type is a long on most architectures and 32 bits on some; the
	// magic numbers all fit 32 bits.
	return uint32(st.Type), nil //nolint:gosec // see above
}

// fsName names the filesystem of statfs type t, for a Reason an
// administrator reads.
func fsName(t uint32) string {
	names := map[uint32]string{
		unix.BTRFS_SUPER_MAGIC:     "btrfs",
		unix.EXT4_SUPER_MAGIC:      "ext2/ext3/ext4",
		unix.XFS_SUPER_MAGIC:       "xfs",
		unix.TMPFS_MAGIC:           "tmpfs",
		unix.RAMFS_MAGIC:           "ramfs",
		unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
		unix.NFS_SUPER_MAGIC:       "NFS",
		unix.F2FS_SUPER_MAGIC:      "f2fs",
		unix.FUSE_SUPER_MAGIC:      "a FUSE filesystem",
		unix.CIFS_SUPER_MAGIC:      "SMB/CIFS",
		unix.SMB2_SUPER_MAGIC:      "SMB/CIFS",
		zfsSuperMagic:              "zfs",
	}
	if name, ok := names[t]; ok {
		return name
	}
	return fmt.Sprintf("a filesystem of type %#x", t)
}

// zfsSuperMagic is OpenZFS's statfs type, which Linux's headers lack.
const zfsSuperMagic = 0x2fc12fc1

func closeFD(fd int) { _ = unix.Close(fd) }
