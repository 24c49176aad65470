// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckFileHandles(t *testing.T) {
	dir := t.TempDir()
	// The real call: the test machines' file systems (ext4) hand out handles.
	if err := CheckFileHandles(dir); err != nil {
		t.Fatalf("CheckFileHandles(%s) on this machine's file system: %v", dir, err)
	}

	// An overlayfs answers EOPNOTSUPP, as the nodes' overlaid /var of
	// test/cluster did, where Ganesha then refused every export.
	err := checkFileHandles(dir, func(string) error { return unix.EOPNOTSUPP })
	if !errors.Is(err, ErrNoFileHandles) {
		t.Fatalf("EOPNOTSUPP gave %v, want ErrNoFileHandles", err)
	}
	for _, want := range []string{dir, "ext4, XFS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// Another failure is reported as it is, not as unsupported.
	err = checkFileHandles(dir, func(string) error { return unix.ENOENT })
	if err == nil || errors.Is(err, ErrNoFileHandles) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("ENOENT gave %v, want it wrapped and not ErrNoFileHandles", err)
	}
}
