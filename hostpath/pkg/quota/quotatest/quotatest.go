// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package quotatest gives tests a real btrfs filesystem: made in a file,
// mounted through a loop device, undone when the test ends.
package quotatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ImageBytes is the size of the filesystem MountBtrfs makes.
const ImageBytes = 256 << 20

// RequireTools fails under CI (CI=true, as .ci/run sets it) and skips
// elsewhere when a test cannot make a btrfs filesystem: that needs root
// and btrfs-progs, which `make test` installs (hack/deps/hostpath.sh).
func RequireTools(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (to mount a loop device)")
	}
	for _, tool := range []string{"mkfs.btrfs", "btrfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (apt-get install btrfs-progs)")
		}
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		missing = append(missing, "losetup (apt-get install mount)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "btrfs tests need " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// MountBtrfs makes a btrfs filesystem of ImageBytes in a file, mounts it
// through a loop device in a temporary directory and returns the mount
// point; with quota, quotas are enabled as an administrator enables them
// (`btrfs quota enable`, then the rescan waited for).
func MountBtrfs(t testing.TB, quota bool) string {
	t.Helper()
	RequireTools(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "btrfs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, ImageBytes); err != nil {
		t.Fatal(err)
	}
	Run(t, "mkfs.btrfs", "-q", img)
	dev := strings.TrimSpace(Run(t, "losetup", "--find", "--show", img))
	t.Cleanup(func() { Run(t, "losetup", "--detach", dev) })
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dev, mnt, "btrfs", 0, ""); err != nil {
		t.Fatalf("mounting %s on %s: %v", dev, mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
		}
	})
	if quota {
		Run(t, "btrfs", "quota", "enable", mnt)
		Run(t, "btrfs", "quota", "rescan", "-w", mnt)
	}
	return mnt
}

// Run runs a command and returns its output, failing the test on error.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
