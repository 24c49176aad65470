// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command hostpath-provisioner provisions PersistentVolumes as directories on
// a node. See hostpath/README.md.
package main

import (
	"os"

	"github.com/kubeprov/external-storage/hostpath/app"
)

func main() {
	// cobra prints the error; the exit status tells the kubelet it failed.
	if err := app.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
