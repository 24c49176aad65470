// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kubeprov/external-storage/hostpath/pkg/quota/quotatest"
	"github.com/kubeprov/external-storage/lib/nofollow"
)

const mib = 1 << 20

// The sizes linux/btrfs.h gives (or implies) for each struct, and the
// request numbers its _IOW/_IOR/_IOWR make of them on x86 and arm.
func TestIoctlABI(t *testing.T) {
	for name, c := range map[string]struct{ got, want uintptr }{
		"btrfs_ioctl_vol_args":           {unsafe.Sizeof(volArgs{}), 4096},
		"btrfs_qgroup_limit":             {unsafe.Sizeof(qgroupLimit{}), 40},
		"btrfs_ioctl_qgroup_limit_args":  {unsafe.Sizeof(qgroupLimitArgs{}), 48},
		"btrfs_ioctl_qgroup_create_args": {unsafe.Sizeof(qgroupCreateArgs{}), 16},
		"btrfs_ioctl_ino_lookup_args":    {unsafe.Sizeof(inoLookupArgs{}), 4096},
		"btrfs_ioctl_search_key":         {unsafe.Sizeof(searchKey{}), 104},
		"btrfs_ioctl_search_args":        {unsafe.Sizeof(searchArgs{}), 4096},
		"qgroupLimitArgs.lim offset":     {unsafe.Offsetof(qgroupLimitArgs{}.lim), 8},
		"searchKey.minType offset":       {unsafe.Offsetof(searchKey{}.minType), 56},
		"searchKey.nrItems offset":       {unsafe.Offsetof(searchKey{}.nrItems), 64},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes; the header's is %d", name, c.got, c.want)
		}
	}
	if iocWrite != 1 {
		return // powerpc and mips encode directions differently
	}
	for name, c := range map[string]struct{ got, want uintptr }{
		"BTRFS_IOC_SUBVOL_CREATE": {iocSubvolCreate, 0x5000940e},
		"BTRFS_IOC_SNAP_DESTROY":  {iocSnapDestroy, 0x5000940f},
		"BTRFS_IOC_TREE_SEARCH":   {iocTreeSearch, 0xd0009411},
		"BTRFS_IOC_INO_LOOKUP":    {iocInoLookup, 0xd0009412},
		"BTRFS_IOC_QGROUP_CREATE": {iocQgroupCreate, 0x4010942a},
		"BTRFS_IOC_QGROUP_LIMIT":  {iocQgroupLimit, 0x8030942b},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x; want %#x", name, c.got, c.want)
		}
	}
}

func TestProbe(t *testing.T) {
	withQuota := quotatest.MountBtrfs(t, true)
	without := quotatest.MountBtrfs(t, false)
	other := t.TempDir()
	cases := []struct {
		dir, kind, reason string
	}{
		{withQuota, KindBtrfs, ""},
		{without, "", "btrfs quotas are off on " + without + ": run `btrfs quota enable " + without + "`"},
		{other, "", "which has no per-directory limits this provisioner can set"},
	}
	for _, c := range cases {
		s, err := Probe(c.dir)
		if err != nil || s.Kind != c.kind || !strings.Contains(s.Reason, c.reason) || (c.reason == "") != (s.Reason == "") {
			t.Errorf("Probe(%s) = %+v, %v; want kind %q, reason containing %q", c.dir, s, err, c.kind, c.reason)
		}
	}
	if _, err := Probe(filepath.Join(other, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Probe of a missing path = %v; want fs.ErrNotExist", err)
	}
	if err := Create(without, "ns/vol", 0o755, 16*mib); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Create without quotas = %v; want ErrUnsupported", err)
	}
	if _, err := os.Lstat(filepath.Join(without, "ns/vol")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create without quotas made the volume: %v", err)
	}
}

// A pod writing past its claim gets EDQUOT; an expanded claim gets the room.
func TestLimitIsEnforcedAndRaised(t *testing.T) {
	root := quotatest.MountBtrfs(t, true)
	if err := Create(root, "ns/vol", 0o777, 16*mib); err != nil {
		t.Fatalf("Create = %v", err)
	}
	vol := filepath.Join(root, "ns/vol")
	if err := writeFile(filepath.Join(vol, "a"), 12*mib); err != nil {
		t.Fatalf("writing 12 MiB under a 16 MiB limit = %v", err)
	}
	if err := writeFile(filepath.Join(vol, "b"), 5*mib); !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("writing 17 MiB under a 16 MiB limit = %v; want EDQUOT", err)
	}
	if err := SetLimit(root, "ns/vol", 32*mib); err != nil {
		t.Fatalf("SetLimit = %v", err)
	}
	if err := writeFile(filepath.Join(vol, "b"), 8*mib); err != nil {
		t.Fatalf("writing 20 MiB under the raised 32 MiB limit = %v", err)
	}
	syncFS(t, root)
	used, err := Used(root, "ns/vol")
	if err != nil || used < 20*mib || used > 21*mib {
		t.Errorf("Used = %d (%.1f MiB), %v; want 20 MiB and a little metadata", used, float64(used)/mib, err)
	}
	if got := limitOf(t, root, "ns/vol"); got != 32*mib {
		t.Errorf("limit = %d; want %d", got, 32*mib)
	}
}

// Provision is repeated after restarts: an existing subvolume is success
// and gets the limit and mode asked for; a plain directory is refused.
func TestCreateIsIdempotentAndSetsMode(t *testing.T) {
	root := quotatest.MountBtrfs(t, true)
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	for range 2 {
		if err := Create(root, "ns/vol", fs.ModeSetgid|0o775, 8*mib); err != nil {
			t.Fatalf("Create = %v", err)
		}
	}
	st, err := os.Stat(filepath.Join(root, "ns/vol"))
	if err != nil || st.Mode() != fs.ModeDir|fs.ModeSetgid|0o775 {
		t.Errorf("mode = %v, %v; want dg rwxrwxr-x whatever the umask", st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(root, "ns")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("parent mode = %v, %v; want 0755", st.Mode(), err)
	}
	if err := Create(root, "ns/vol", 0o775, 24*mib); err != nil {
		t.Fatalf("Create again with another limit = %v", err)
	}
	if got := limitOf(t, root, "ns/vol"); got != 24*mib {
		t.Errorf("limit after a repeated Create = %d; want %d", got, 24*mib)
	}
	if ok, err := IsSubvolume(root, "ns/vol"); !ok || err != nil {
		t.Errorf("IsSubvolume(volume) = %v, %v", ok, err)
	}
	if err := os.Mkdir(filepath.Join(root, "ns/plain"), 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, err := IsSubvolume(root, "ns/plain"); ok || err != nil {
		t.Errorf("IsSubvolume(directory) = %v, %v", ok, err)
	}
	if ok, err := IsSubvolume(root, "ns/missing"); ok || err != nil {
		t.Errorf("IsSubvolume(missing) = %v, %v", ok, err)
	}
	for name, f := range map[string]func() error{
		"Create":   func() error { return Create(root, "ns/plain", 0o755, 8*mib) },
		"SetLimit": func() error { return SetLimit(root, "ns/plain", 8*mib) },
		"Remove":   func() error { return Remove(root, "ns/plain") },
	} {
		if err := f(); !errors.Is(err, ErrNotSubvolume) || !strings.Contains(err.Error(), filepath.Join(root, "ns/plain")) {
			t.Errorf("%s on a plain directory = %v; want ErrNotSubvolume naming it", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "ns/plain")); err != nil {
		t.Errorf("the plain directory is gone: %v", err)
	}
}

// A deleted volume's room is the next volume's: without it the second
// write below would not fit the filesystem. Its qgroup goes too, or at
// least counts nothing.
func TestRemoveFreesTheRoom(t *testing.T) {
	root := quotatest.MountBtrfs(t, true)
	size := freeBytes(t, root) * 6 / 10 / mib * mib
	var ids []uint64
	for _, rel := range []string{"a/vol", "b/vol"} {
		if err := Create(root, rel, 0o755, size+16*mib); err != nil {
			t.Fatalf("Create(%s) = %v", rel, err)
		}
		ids = append(ids, idOf(t, root, rel))
		if err := writeFile(filepath.Join(root, rel, "data"), size); err != nil {
			t.Fatalf("writing %d MiB into %s = %v", size/mib, rel, err)
		}
		if err := Remove(root, rel); err != nil {
			t.Fatalf("Remove(%s) = %v", rel, err)
		}
		if _, err := os.Lstat(filepath.Join(root, rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s after Remove: %v; want it gone", rel, err)
		}
		waitForCleaner(t, root)
	}
	if err := Remove(root, "a/vol"); err != nil {
		t.Errorf("Remove of a removed volume = %v; want success", err)
	}
	if err := Remove(root, "missing/vol"); err != nil {
		t.Errorf("Remove with a missing parent = %v; want success", err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	for _, id := range ids {
		rfer, excl, err := qgroupCounts(fd, id)
		switch {
		case errors.Is(err, errNoItem):
			t.Logf("qgroup 0/%d is gone", id)
		case err != nil || rfer != 0 || excl != 0:
			t.Errorf("qgroup 0/%d of a removed volume: %d bytes referenced, %d exclusive, %v; want it gone or empty", id, rfer, excl, err)
		default:
			t.Logf("qgroup 0/%d is left, empty", id)
		}
	}
}

// A link planted in a volume's path is never followed: nothing is made,
// limited or removed through it.
func TestLinksAreRefused(t *testing.T) {
	root := quotatest.MountBtrfs(t, true)
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"ns/parent", "ns/leaf"} {
		if err := os.Symlink(outside, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range map[string]func() error{
		"Create through a parent link": func() error { return Create(root, "ns/parent/vol", 0o755, 8*mib) },
		"Create at a link":             func() error { return Create(root, "ns/leaf", 0o755, 8*mib) },
		"SetLimit at a link":           func() error { return SetLimit(root, "ns/leaf", 8*mib) },
		"Remove through a parent link": func() error { return Remove(root, "ns/parent/vol") },
		"Remove at a link":             func() error { return Remove(root, "ns/leaf") },
		"IsSubvolume at a link":        func() error { _, err := IsSubvolume(root, "ns/leaf"); return err },
	} {
		if err := f(); !errors.Is(err, nofollow.ErrSymlink) {
			t.Errorf("%s = %v; want nofollow.ErrSymlink", name, err)
		}
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
		t.Errorf("outside the root: %v, %v; want nothing made", entries, err)
	}
	for _, link := range []string{"ns/parent", "ns/leaf"} {
		if st, err := os.Lstat(filepath.Join(root, link)); err != nil || st.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s: %v, %v; want the link left as it was", link, st, err)
		}
	}
}

const (
	iocSync = iocNone<<iocDirShift | btrfsIoctlMagic<<8 | 8
)

// writeFile writes n bytes into a new file p and syncs it, returning the
// first error, as a pod's write would see it.
func writeFile(p string, n int64) (err error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	buf := make([]byte, mib)
	for i := range buf {
		buf[i] = byte(i) // not zeros, not compressible either way
	}
	for ; n > 0; n -= mib {
		if _, err := f.Write(buf[:min(n, mib)]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// syncFS commits the filesystem's transaction: qgroup numbers are
// updated then.
func syncFS(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	if err := unix.Syncfs(fd); err != nil {
		t.Fatal(err)
	}
}

// waitForCleaner waits until deleted subvolumes are dropped and their
// space is free.
func waitForCleaner(t *testing.T, mnt string) {
	t.Helper()
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	var none struct{}
	if err := ioctl(fd, iocSync, &none); err != nil {
		t.Fatalf("BTRFS_IOC_SYNC on %s: %v", mnt, err)
	}
	quotatest.Run(t, "btrfs", "subvolume", "sync", mnt)
	syncFS(t, mnt)
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// limitOf is the referenced-bytes limit of the volume rel under root, as
// the kernel recorded it.
func limitOf(t *testing.T, root, rel string) int64 {
	t.Helper()
	id := idOf(t, root, rel)
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	item, err := quotaItem(fd, qgroupLimitKey, id)
	if err != nil {
		t.Fatalf("reading the limit of qgroup 0/%d: %v", id, err)
	}
	if flags := binary.LittleEndian.Uint64(item); flags&qgroupLimitMaxRfer == 0 {
		t.Fatalf("qgroup 0/%d has no referenced limit (flags %#x)", id, flags)
	}
	return int64(binary.LittleEndian.Uint64(item[8:]))
}

// idOf is the subvolume id of the volume rel under root.
func idOf(t *testing.T, root, rel string) uint64 {
	t.Helper()
	fd, err := openExistingSubvolume(root, rel)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	id, err := subvolumeID(fd)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
