// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package pathpattern

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrOverlap marks a volume directory that is another volume's, or is
// inside or above it: a pod of one volume could read, write, or replace by
// a link, the other's data.
var ErrOverlap = errors.New("volume directories overlap")

// Overlap reports whether two clean slash paths, both relative or both
// absolute, are the same or one is inside the other.
func Overlap(a, b string) bool {
	return a == b || a == "/" || b == "/" || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// Volume is the directory of one volume.
type Volume struct {
	// PV is the PersistentVolume's name.
	PV string
	// Dir is its directory, as the caller compares them (relative to one
	// root, or absolute on one node).
	Dir string
}

// CheckOverlap refuses dir for volume pv when the directory of another of
// volumes overlaps it (Overlap). The error wraps ErrOverlap and names that
// volume; where says where the directories are ("on the NFS share").
func CheckOverlap(dir, pv, where string, volumes []Volume) error {
	for _, v := range volumes {
		if v.PV == pv || !Overlap(dir, v.Dir) {
			continue
		}
		if v.Dir == dir {
			return fmt.Errorf("%w: directory %q %s is already used by PersistentVolume %s; change the StorageClass's %s so that claims get distinct directories",
				ErrOverlap, dir, where, v.PV, Key)
		}
		return fmt.Errorf("%w: directory %q %s overlaps directory %q of PersistentVolume %s (one is inside the other); change the StorageClass's %s so that volumes do not nest",
			ErrOverlap, dir, where, v.Dir, v.PV, Key)
	}
	return nil
}

// InUse holds the directories of volumes being made, and of volumes made
// by this process, until their PVs are in the caller's cache: without it,
// two claims provisioned at once could get nested directories. Scopes
// (a share, a node) keep directories of different roots apart. The zero
// value is ready to use.
type InUse struct {
	mu   sync.Mutex
	dirs map[string][]Volume // by scope
}

// Reserve records dir in scope for pv unless it overlaps a directory
// reserved for another volume, or one of existing (CheckOverlap).
func (u *InUse) Reserve(scope, dir, pv, where string, existing []Volume) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := CheckOverlap(dir, pv, where, u.dirs[scope]); err != nil {
		return err
	}
	if err := CheckOverlap(dir, pv, where, existing); err != nil {
		return err
	}
	if u.dirs == nil {
		u.dirs = map[string][]Volume{}
	}
	for _, v := range u.dirs[scope] {
		if v.PV == pv && v.Dir == dir {
			return nil
		}
	}
	u.dirs[scope] = append(u.dirs[scope], Volume{PV: pv, Dir: dir})
	return nil
}

// Check is Reserve without recording dir: whether pv may act on it.
func (u *InUse) Check(scope, dir, pv, where string, existing []Volume) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := CheckOverlap(dir, pv, where, u.dirs[scope]); err != nil {
		return err
	}
	return CheckOverlap(dir, pv, where, existing)
}

// Release forgets dir of pv in scope.
func (u *InUse) Release(scope, dir, pv string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	vols := u.dirs[scope]
	for i, v := range vols {
		if v.PV == pv && v.Dir == dir {
			u.dirs[scope] = append(vols[:i], vols[i+1:]...)
			break
		}
	}
	if len(u.dirs[scope]) == 0 {
		delete(u.dirs, scope)
	}
}
