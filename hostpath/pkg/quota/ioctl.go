// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's btrfs interface, from its uapi headers linux/btrfs.h and
// linux/btrfs_tree.h. The structs mirror the header's layout field for
// field (TestIoctlABI checks each size against the header's); every field
// is a 64-bit integer or a byte array at an 8-byte offset, so Go and C lay
// them out alike on every architecture, 32-bit ones included.

// btrfsIoctlMagic is BTRFS_IOCTL_MAGIC, the type byte of every btrfs ioctl.
const btrfsIoctlMagic = 0x94

// firstFreeObjectID is BTRFS_FIRST_FREE_OBJECTID: the inode number of every
// subvolume's root directory, which is how a subvolume is told from a
// directory.
const firstFreeObjectID = 256

// Keys of the quota tree (BTRFS_QUOTA_TREE_OBJECTID), which exists only
// while quotas are enabled: one status item (0, QGROUP_STATUS, 0), and per
// qgroup an info item (0, QGROUP_INFO, id) and a limit item
// (0, QGROUP_LIMIT, id).
const (
	quotaTreeObjectID = 8
	qgroupStatusKey   = 240
	qgroupInfoKey     = 242
	qgroupLimitKey    = 244
)

// qgroupStatusFlagOn is BTRFS_QGROUP_STATUS_FLAG_ON in the status item.
const qgroupStatusFlagOn = 1 << 0

// qgroupLimitMaxRfer is BTRFS_QGROUP_LIMIT_MAX_RFER: the limit caps the
// bytes a qgroup references, which is what a volume's writes add to. The
// exclusive limit would let snapshots that share data escape it.
const qgroupLimitMaxRfer = 1 << 0

// volArgs is struct btrfs_ioctl_vol_args (4096 bytes): a name in the
// directory the ioctl is called on (BTRFS_PATH_NAME_MAX 4087, NUL ended).
type volArgs struct {
	_    int64 // fd: unused by the ioctls here
	name [4088]byte
}

// qgroupLimit is struct btrfs_qgroup_limit (40 bytes); only the fields
// flags names are changed.
type qgroupLimit struct {
	flags   uint64
	maxRfer uint64
	_       [3]uint64 // max_excl, rsv_rfer, rsv_excl
}

// qgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args (48 bytes).
type qgroupLimitArgs struct {
	qgroupID uint64
	lim      qgroupLimit
}

// qgroupCreateArgs is struct btrfs_ioctl_qgroup_create_args (16 bytes);
// create 0 removes the qgroup.
type qgroupCreateArgs struct {
	create   uint64
	qgroupID uint64
}

// inoLookupArgs is struct btrfs_ioctl_ino_lookup_args (4096 bytes,
// BTRFS_INO_LOOKUP_PATH_MAX 4080). With treeid 0 and objectid 256 the
// kernel answers the id of the subvolume the descriptor is in, without
// CAP_SYS_ADMIN.
type inoLookupArgs struct {
	treeID   uint64
	objectID uint64
	_        [4080]byte // name
}

// searchKey is struct btrfs_ioctl_search_key (104 bytes): keys from
// (minObjectID, minType, minOffset) to the max ones, in that order.
type searchKey struct {
	treeID     uint64
	_          [2]uint64 // min_objectid, max_objectid: 0 for every quota item
	minOffset  uint64
	maxOffset  uint64
	_          uint64 // min_transid
	maxTransID uint64
	minType    uint32
	maxType    uint32
	nrItems    uint32
	_          uint32    // unused
	_          [4]uint64 // unused1 to unused4
}

// searchArgs is struct btrfs_ioctl_search_args (4096 bytes): the key, then
// the items found, each a searchHeader followed by the item's bytes.
type searchArgs struct {
	key searchKey
	buf [4096 - 104]byte
}

// searchHeaderSize is sizeof(struct btrfs_ioctl_search_header): transid,
// objectid, offset (64 bits each), type and len (32 bits), in the CPU's
// byte order; the item after it is in the disk's, little-endian.
const searchHeaderSize = 32

// The ioctl request numbers, _IOW/_IOR/_IOWR(BTRFS_IOCTL_MAGIC, nr, type)
// as the header defines them. BTRFS_IOC_QGROUP_LIMIT is _IOR although the
// kernel reads it: the number is what the header says, not what it means.
const (
	iocSubvolCreate = iocWrite<<iocDirShift | unsafe.Sizeof(volArgs{})<<16 | btrfsIoctlMagic<<8 | 14
	iocSnapDestroy  = iocWrite<<iocDirShift | unsafe.Sizeof(volArgs{})<<16 | btrfsIoctlMagic<<8 | 15
	iocTreeSearch   = (iocRead|iocWrite)<<iocDirShift | unsafe.Sizeof(searchArgs{})<<16 | btrfsIoctlMagic<<8 | 17
	iocInoLookup    = (iocRead|iocWrite)<<iocDirShift | unsafe.Sizeof(inoLookupArgs{})<<16 | btrfsIoctlMagic<<8 | 18
	iocQgroupCreate = iocWrite<<iocDirShift | unsafe.Sizeof(qgroupCreateArgs{})<<16 | btrfsIoctlMagic<<8 | 42
	iocQgroupLimit  = iocRead<<iocDirShift | unsafe.Sizeof(qgroupLimitArgs{})<<16 | btrfsIoctlMagic<<8 | 43
)

// ioctl calls request req on fd with arg, the struct the request names.
func ioctl[T any](fd int, req uintptr, arg *T) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(arg))) //nolint:gosec // arg is the struct req is defined with (TestIoctlABI)
	if errno != 0 {
		return errno
	}
	return nil
}

// setName writes name, NUL ended, into a name field of the ioctl structs.
func setName(dst []byte, name string) error {
	if len(name) >= len(dst) {
		return fmt.Errorf("name %q is longer than btrfs takes (%d bytes)", name, len(dst)-1)
	}
	copy(dst, name)
	dst[len(name)] = 0
	return nil
}

// createSubvolume makes name, a new subvolume, in the directory dir.
func createSubvolume(dir int, name string) error {
	var a volArgs
	if err := setName(a.name[:], name); err != nil {
		return err
	}
	return ioctl(dir, iocSubvolCreate, &a)
}

// destroySubvolume deletes the subvolume name in dir with all it holds;
// the kernel looks name up in dir itself, so a link there is never
// followed (it is no subvolume: EINVAL). Its space is freed later, by the
// filesystem's cleaner thread.
func destroySubvolume(dir int, name string) error {
	var a volArgs
	if err := setName(a.name[:], name); err != nil {
		return err
	}
	return ioctl(dir, iocSnapDestroy, &a)
}

// subvolumeID is the id of the subvolume fd is in, which is also the id of
// its level-0 qgroup (0/id).
func subvolumeID(fd int) (uint64, error) {
	a := inoLookupArgs{objectID: firstFreeObjectID}
	if err := ioctl(fd, iocInoLookup, &a); err != nil {
		return 0, err
	}
	return a.treeID, nil
}

// setQgroupLimit caps the bytes qgroup 0/id references at limit.
func setQgroupLimit(fd int, id uint64, limit uint64) error {
	a := qgroupLimitArgs{qgroupID: id, lim: qgroupLimit{flags: qgroupLimitMaxRfer, maxRfer: limit}}
	return ioctl(fd, iocQgroupLimit, &a)
}

// removeQgroup deletes qgroup 0/id.
func removeQgroup(fd int, id uint64) error {
	a := qgroupCreateArgs{create: 0, qgroupID: id}
	return ioctl(fd, iocQgroupCreate, &a)
}

// errNoItem: the quota tree has no item at the key searched.
var errNoItem = errors.New("no such item")

// quotaItem reads the quota tree's item (0, typ, offset) through fd, any
// descriptor on the filesystem. It needs CAP_SYS_ADMIN (EPERM otherwise);
// with quotas off the tree is missing and the kernel answers ENOENT.
func quotaItem(fd int, typ uint32, offset uint64) ([]byte, error) {
	a := searchArgs{key: searchKey{
		treeID:     quotaTreeObjectID,
		minType:    typ,
		maxType:    typ,
		minOffset:  offset,
		maxOffset:  offset,
		maxTransID: math.MaxUint64,
		nrItems:    1,
	}}
	if err := ioctl(fd, iocTreeSearch, &a); err != nil {
		return nil, err
	}
	if a.key.nrItems == 0 {
		return nil, errNoItem
	}
	h := a.buf[:searchHeaderSize]
	gotOffset := binary.NativeEndian.Uint64(h[16:])
	gotType := binary.NativeEndian.Uint32(h[24:])
	size := int(binary.NativeEndian.Uint32(h[28:]))
	if gotType != typ || gotOffset != offset || binary.NativeEndian.Uint64(h[8:]) != 0 {
		return nil, errNoItem
	}
	if size > len(a.buf)-searchHeaderSize {
		return nil, fmt.Errorf("quota tree item of %d bytes does not fit the search buffer", size)
	}
	return a.buf[searchHeaderSize : searchHeaderSize+size], nil
}

// quotaOn reports whether quotas are enabled on fd's filesystem: its quota
// tree exists and its status item has the ON flag.
func quotaOn(fd int) (bool, error) {
	item, err := quotaItem(fd, qgroupStatusKey, 0)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, errNoItem):
		return false, nil
	case err != nil:
		return false, err
	case len(item) < 24:
		return false, fmt.Errorf("qgroup status item of %d bytes, want at least 24", len(item))
	}
	return binary.LittleEndian.Uint64(item[16:])&qgroupStatusFlagOn != 0, nil
}

// qgroupCounts is the bytes qgroup 0/id references and holds exclusively,
// from its info item (generation, rfer, rfer_cmpr, excl, excl_cmpr;
// little-endian), as of the last transaction commit.
func qgroupCounts(fd int, id uint64) (rfer, excl uint64, err error) {
	item, err := quotaItem(fd, qgroupInfoKey, id)
	if err != nil {
		return 0, 0, err
	}
	if len(item) < 32 {
		return 0, 0, fmt.Errorf("qgroup info item of %d bytes, want at least 32", len(item))
	}
	return binary.LittleEndian.Uint64(item[8:]), binary.LittleEndian.Uint64(item[24:]), nil
}
