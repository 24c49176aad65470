// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/nofollow"
)

// ErrInsufficientSpace: no candidate path has the free space a claim asks for.
var ErrInsufficientSpace = errors.New("not enough free space")

// CreateRequest is one volume directory to create on a node.
type CreateRequest struct {
	// Node is where the directory is made.
	Node string
	// PV is the name of the volume the directory is for (names helper pods).
	PV string
	// Namespace is the claim's (helper pods are bounded per namespace).
	Namespace string
	// Roots are the candidate paths; the one with the most free space wins.
	Roots []string
	// Rel is the directory, relative to the chosen root.
	Rel string
	// Mode is the permission bits of the directory.
	Mode fs.FileMode
	// SizeBytes is the claim's request; 0 skips the free space check.
	SizeBytes int64
	// MustBeEmpty refuses an existing directory that holds files (another
	// volume's, when a pathPattern names the same directory twice).
	MustBeEmpty bool
	// Scripts, if set, make it: the setup script (helper pods only).
	Scripts *Scripts
	// Enforce is the configuration's enforceCapacity; empty makes a
	// plain directory, as EnforceNever does.
	Enforce string
}

// Dirs creates and removes volume directories on nodes. LocalDirs does it in
// this process, for its own node; helper pods do it on any node.
type Dirs interface {
	// Create makes r.Rel under the candidate root with the most free space
	// and returns that root. An existing directory is success (Provision is
	// repeated after restarts) unless MustBeEmpty and it holds files.
	Create(ctx context.Context, r CreateRequest) (root string, err error)
	// Remove deletes r.Rel under r.Root on r.Node; a missing one is success.
	Remove(ctx context.Context, r RemoveRequest) error
}

// RemoveRequest is one volume directory to remove from a node.
type RemoveRequest struct {
	// Node is where the directory is.
	Node string
	// Root is the configured path the directory is under.
	Root string
	// Rel is the directory, relative to Root.
	Rel string
	// PV is the volume the directory belongs to.
	PV *corev1.PersistentVolume
	// Scripts, if set, remove it: the teardown script (helper pods only).
	Scripts *Scripts
}

// LocalDirs works on this process's filesystem.
type LocalDirs struct {
	// FreeBytes reports a path's free space; nil means statfs.
	FreeBytes func(path string) (uint64, error)
}

var (
	_ Dirs  = LocalDirs{}
	_ Sizer = LocalDirs{}
)

// statfsFree is the space an unprivileged user may still write under path.
func statfsFree(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil //nolint:gosec // block size is positive
}

// FilesystemSize implements Sizer: the size of path's filesystem, as df
// reports it.
func (LocalDirs) FilesystemSize(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * st.Bsize, nil //nolint:gosec // a filesystem's size fits int64
}

// Create implements Dirs.
func (d LocalDirs) Create(_ context.Context, r CreateRequest) (string, error) {
	if err := scriptsNeedHelperPods(r.Scripts); err != nil {
		return "", err
	}
	free := d.FreeBytes
	if free == nil {
		free = statfsFree
	}
	root, best := "", uint64(0)
	var errs []error
	for _, c := range r.Roots {
		// A missing path is not created: in a pod it means that its
		// hostPath mount is missing, and the volume would not be on the node.
		f, err := free(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("path %s on node %s (check --pv-dir or the configuration, and the provisioner's hostPath mounts): %w", c, r.Node, err))
			continue
		}
		if root == "" || f > best {
			root, best = c, f
		}
	}
	if root == "" {
		return "", errors.Join(errs...)
	}
	if r.SizeBytes > 0 && uint64(r.SizeBytes) > best {
		return "", fmt.Errorf("%w on node %s: the claim requests %d bytes, %s has %d bytes free (the most of %v)",
			ErrInsufficientSpace, r.Node, r.SizeBytes, root, best, r.Roots)
	}
	return root, makeVolume(root, r)
}

// makeDir creates rel under root, and any missing parents, without
// following a symbolic link in any component (lib/nofollow), and sets its
// mode whatever the umask. It refuses to make it inside a directory pods
// may write: one of them could swap a parent for a link later.
func makeDir(root, rel string, mode fs.FileMode, mustBeEmpty bool) error {
	_, err := nofollow.MkdirAll(root, rel, nofollow.MkdirOptions{Mode: mode, ParentMode: 0o755, MustBeEmpty: mustBeEmpty})
	return dirError(filepath.Join(root, rel), err)
}

// checkDir is what the path check before a script refuses: a link or a
// non-directory in rel's path, and, with mustBeEmpty, an existing rel that
// holds files, worded as makeDir words it.
func checkDir(root, rel string, mustBeEmpty bool) error {
	if !mustBeEmpty {
		return nofollow.Check(root, rel)
	}
	err := nofollow.CheckEmpty(root, rel)
	if errors.Is(err, nofollow.ErrNotEmpty) {
		return dirError(filepath.Join(root, rel), err)
	}
	return err
}

// dirError says what to do about err, making or checking directory full.
func dirError(full string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nofollow.ErrNotEmpty):
		return fmt.Errorf("%s already exists and holds files, probably another volume's: make pathPattern unique per volume (add ${.PV.name})", full)
	case errors.Is(err, nofollow.ErrSymlink):
		return fmt.Errorf("creating volume directory %s: %w; symbolic links are never followed (a pod may have planted it): remove it from the node", full, err)
	case errors.Is(err, nofollow.ErrNotDir):
		return fmt.Errorf("creating volume directory %s: %w: remove it from the node", full, err)
	case errors.Is(err, nofollow.ErrWritableParent):
		return fmt.Errorf("creating volume directory %s: %w, probably another volume: volumes must not nest; change the StorageClass's %s", full, err, KeyPathPattern)
	default:
		return fmt.Errorf("creating volume directory %s: %w", full, err)
	}
}

// Remove implements Dirs.
func (LocalDirs) Remove(_ context.Context, req RemoveRequest) error {
	if err := scriptsNeedHelperPods(req.Scripts); err != nil {
		return err
	}
	return removeVolume(req.Root, req.Rel)
}

// removeDir removes rel under root without following a symbolic link in
// any component: a link in rel's place or inside it is removed as a link,
// a link in a parent is an error and nothing is removed.
func removeDir(root, rel string) error {
	return removeError(nofollow.RemoveAll(root, rel))
}

// removeError says what to do about a removal refused for a link.
func removeError(err error) error {
	if errors.Is(err, nofollow.ErrSymlink) {
		return fmt.Errorf("%w; symbolic links are never followed (a pod may have replaced a directory by one): nothing was removed; remove the volume's data yourself, then delete the PersistentVolume", err)
	}
	return err
}
