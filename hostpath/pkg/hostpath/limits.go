// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kubeprov/external-storage/hostpath/pkg/quota"
	"github.com/kubeprov/external-storage/lib/nofollow"
)

// ErrCannotEnforce: enforceCapacity is "always" and the path cannot limit
// a volume's size.
var ErrCannotEnforce = errors.New("cannot limit the volume's size")

// Limiter is what Dirs may also do: raise the size limit of a volume it
// made with one (an expansion). LocalDirs can; helper pods make plain
// directories.
type Limiter interface {
	SetLimit(root, rel string, bytes int64) error
	// UsedBytes is what a limited volume holds, and false for a volume
	// without a limit.
	UsedBytes(root, rel string) (int64, bool, error)
}

var _ Limiter = LocalDirs{}

// enforcement says whether volumes under root get a size limit: the
// filesystem's support, or the sentence saying why not. A path whose
// support cannot be read (no CAP_SYS_ADMIN on btrfs) cannot limit.
func enforcement(root string) quota.Support {
	s, err := quota.Probe(root)
	if err != nil {
		return quota.Support{Reason: err.Error()}
	}
	return s
}

// makeVolume makes the volume's directory under root: a btrfs subvolume
// limited to the request where the path can limit it and r.Enforce lets
// it, else a plain directory (refused with EnforceAlways).
func makeVolume(root string, r CreateRequest) error {
	if r.Enforce == "" || r.Enforce == EnforceNever || r.SizeBytes <= 0 {
		return makeDir(root, r.Rel, r.Mode, r.MustBeEmpty)
	}
	if s := enforcement(root); s.Kind == "" {
		if r.Enforce == EnforceAlways {
			return fmt.Errorf("%w on node %s: enforceCapacity is %q, and %s; set enforceCapacity to %q to account such volumes without a limit",
				ErrCannotEnforce, r.Node, EnforceAlways, s.Reason, EnforceAuto)
		}
		return makeDir(root, r.Rel, r.Mode, r.MustBeEmpty)
	}
	if r.MustBeEmpty {
		if err := checkDir(root, r.Rel, true); err != nil {
			return err
		}
	}
	err := quota.Create(root, r.Rel, r.Mode, r.SizeBytes)
	if errors.Is(err, quota.ErrNotSubvolume) && r.Enforce == EnforceAuto {
		// A volume made before limits were possible: it stays a directory.
		return makeDir(root, r.Rel, r.Mode, r.MustBeEmpty)
	}
	return dirError(filepath.Join(root, r.Rel), err)
}

// removeVolume removes rel under root: a subvolume at once, with its
// qgroup; anything else (or a subvolume the kernel will not let this
// process destroy) entry by entry, never following a link.
func removeVolume(root, rel string) error {
	if sub, err := quota.IsSubvolume(root, rel); err == nil && sub {
		err := quota.Remove(root, rel)
		if err == nil || errors.Is(err, nofollow.ErrSymlink) {
			return removeError(err)
		}
	}
	return removeDir(root, rel)
}

// SetLimit implements Limiter: a subvolume's limit is set to bytes; a
// plain directory has none to raise.
func (LocalDirs) SetLimit(root, rel string, bytes int64) error {
	sub, err := quota.IsSubvolume(root, rel)
	if err != nil || !sub {
		return err
	}
	return quota.SetLimit(root, rel, bytes)
}

// UsedBytes implements Limiter.
func (LocalDirs) UsedBytes(root, rel string) (int64, bool, error) {
	sub, err := quota.IsSubvolume(root, rel)
	if err != nil || !sub {
		return 0, false, err
	}
	used, err := quota.Used(root, rel)
	return used, err == nil, err
}

// Enforcement is, for each path this instance makes volumes on, whether
// their sizes are limited and, if not, why: for the start-up log, so that
// an administrator knows which paths only account.
func (p *Provisioner) Enforcement() map[string]string {
	out := map[string]string{}
	_, local := p.cfg.Dirs.(Limiter)
	for _, sp := range p.servedPaths() {
		for _, root := range sp.roots {
			switch {
			case sp.paths.Enforce == EnforceNever:
				out[root] = "accounted, not enforced: enforceCapacity is never"
			case !local:
				out[root] = "accounted, not enforced: helper pods make plain directories"
			default:
				if s := enforcement(root); s.Kind != "" {
					out[root] = "enforced: each volume is a " + s.Kind + " subvolume limited to its request"
				} else {
					out[root] = "accounted, not enforced: " + s.Reason
				}
			}
		}
	}
	return out
}
