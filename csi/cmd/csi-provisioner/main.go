// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command csi-provisioner provisions PersistentVolumes with a CSI driver.
package main

import (
	"os"

	"github.com/kubeprov/external-storage/csi/app"
)

func main() {
	if err := app.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
