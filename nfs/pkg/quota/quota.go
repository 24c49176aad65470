// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package quota limits the size of server-mode volumes. The only
// implementation is XFS project quota through the xfs_quota tool: each
// volume directory becomes a project whose id is the volume's Export_Id (unique
// and persisted already) with a hard block limit of the claim's request.
package quota

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Quota sets and clears size limits of volume directories.
type Quota interface {
	// Set limits directory dir (below the root) to bytes, as project id.
	Set(ctx context.Context, dir string, id uint32, bytes int64) error
	// Clear removes the limit and the project of dir.
	Clear(ctx context.Context, dir string, id uint32) error
}

// XFS runs xfs_quota in expert mode on the filesystem mounted at Root.
type XFS struct {
	// Root is the export root: a directory on the XFS filesystem.
	Root string
	// Command is the xfs_quota binary; "xfs_quota" (from PATH) when empty.
	Command string
}

// NewXFS checks that project quota is enforced on the filesystem of root
// and returns the quota.
func NewXFS(ctx context.Context, root string) (*XFS, error) {
	q := &XFS{Root: root}
	out, err := q.run(ctx, "state -p")
	if err != nil {
		return nil, fmt.Errorf("--enable-xfs-quota: checking project quota on %s: %w", root, err)
	}
	// xfs_quota prints "Enforcement: ON" under "Project quota state on ...".
	if !strings.Contains(out, "Enforcement: ON") {
		return nil, fmt.Errorf("--enable-xfs-quota: project quota is not enforced on the filesystem of %s "+
			"(mount it as XFS with the prjquota option): xfs_quota said %q", root, strings.TrimSpace(out))
	}
	return q, nil
}

// Set implements Quota.
func (q *XFS) Set(ctx context.Context, dir string, id uint32, bytes int64) error {
	if bytes <= 0 {
		return fmt.Errorf("quota of %s must be more than 0 bytes", dir)
	}
	if _, err := q.run(ctx, fmt.Sprintf("project -s -p %s %d", dir, id)); err != nil {
		return fmt.Errorf("setting up XFS project %d for %s: %w", id, dir, err)
	}
	if _, err := q.run(ctx, fmt.Sprintf("limit -p bhard=%d %d", bytes, id)); err != nil {
		return fmt.Errorf("setting XFS quota of project %d: %w", id, err)
	}
	return nil
}

// Clear implements Quota.
func (q *XFS) Clear(ctx context.Context, dir string, id uint32) error {
	if _, err := q.run(ctx, fmt.Sprintf("limit -p bhard=0 %d", id)); err != nil {
		return fmt.Errorf("clearing XFS quota of project %d: %w", id, err)
	}
	if _, err := q.run(ctx, fmt.Sprintf("project -C -p %s %d", dir, id)); err != nil {
		return fmt.Errorf("clearing XFS project %d of %s: %w", id, dir, err)
	}
	return nil
}

func (q *XFS) run(ctx context.Context, command string) (string, error) {
	bin := q.Command
	if bin == "" {
		bin = "xfs_quota"
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-x", "-c", command, q.Root) // #nosec G204 -- fixed tool, arguments built here
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("xfs_quota -x -c %s: %w: %s", strconv.Quote(command), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
