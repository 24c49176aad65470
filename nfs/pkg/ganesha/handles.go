// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNoFileHandles is returned by CheckFileHandles for a file system that
// cannot hand out file handles.
var ErrNoFileHandles = errors.New("the file system cannot hand out file handles, which NFS-Ganesha's VFS backend needs to export it")

// fsNames names the file systems known not to hand out file handles (by
// default), for the error message.
var fsNames = map[int64]string{
	unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
	unix.FUSE_SUPER_MAGIC:      "FUSE",
	unix.PROC_SUPER_MAGIC:      "proc",
}

// CheckFileHandles tells whether Ganesha can export directories under dir:
// its VFS backend reaches every file by handle (name_to_handle_at and
// open_by_handle_at), which some file systems do not support (overlayfs,
// such as a container's root or a node's overlaid /var). Without this
// check the first claim fails with Ganesha's "invalid param value".
func CheckFileHandles(dir string) error {
	return checkFileHandles(dir, func(path string) error {
		_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
		return err
	})
}

func checkFileHandles(dir string, nameToHandle func(string) error) error {
	err := nameToHandle(dir)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("checking that %s can be exported (name_to_handle_at): %w", dir, err)
	}
	fs := "its file system"
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		if name, ok := fsNames[int64(st.Type)]; ok {
			fs = name
		} else {
			fs = fmt.Sprintf("file system type %#x", st.Type)
		}
	}
	return fmt.Errorf("%s is on %s: %w; put it on ext4, XFS or another file system that supports NFS export", dir, fs, ErrNoFileHandles)
}
