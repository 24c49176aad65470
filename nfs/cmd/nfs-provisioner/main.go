// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command nfs-provisioner provisions NFS volumes: exports of its own
// NFS-Ganesha (server mode) or directories of an existing export (subdir mode).
package main

import (
	"os"

	"github.com/kubeprov/external-storage/nfs/app"
)

func main() {
	if err := app.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
