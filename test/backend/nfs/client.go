// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ClientTools are libnfs's userspace NFS client (Debian libnfs-utils,
// hack/deps/nfs.sh). The kernel of the test machines has no NFS client:
// tests reach exports through these, never through a mount.
var ClientTools = []string{"nfs-ls", "nfs-cp", "nfs-cat"}

// Client speaks NFS to one server with libnfs's tools, as one user.
type Client struct {
	// Server is an address the test machine routes to.
	Server string
	// Version is the NFS version, "3" or "4".
	Version string
	// UID and GID are sent as the caller's AUTH_SYS credentials; root (0)
	// unless set, as libnfs does for root.
	UID, GID int
}

// URL is the libnfs URL of path on the server.
func (c Client) URL(path string) string {
	return fmt.Sprintf("nfs://%s%s?version=%s&uid=%d&gid=%d", c.Server, path, c.Version, c.UID, c.GID)
}

// Write writes content to the file at path.
func (c Client) Write(ctx context.Context, path, content string) error {
	dir, err := os.MkdirTemp("", "kubeprov-nfs-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(local, []byte(content), 0o644); err != nil {
		return err
	}
	_, err = runClient(ctx, "nfs-cp", local, c.URL(path))
	return err
}

// Read returns the content of the file at path.
func (c Client) Read(ctx context.Context, path string) (string, error) {
	return runClient(ctx, "nfs-cat", c.URL(path))
}

// List lists the directory at path (nfs-ls).
func (c Client) List(ctx context.Context, path string) (string, error) {
	return runClient(ctx, "nfs-ls", c.URL(path))
}

// runClient runs a client tool and returns its standard output; its error
// carries the tool's output (libnfs prints the NFS status, such as
// MNT3ERR_ACCES or NFS4ERR_NOENT).
func runClient(ctx context.Context, tool string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+stdout.String()))
	}
	return stdout.String(), nil
}
