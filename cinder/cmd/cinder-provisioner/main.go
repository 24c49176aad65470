// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cinder-provisioner provisions Kubernetes volumes from Cinder as
// native iSCSI, RBD or Fibre Channel PersistentVolumes.
package main

import (
	"os"

	"github.com/kubeprov/external-storage/cinder/app"
)

func main() {
	if err := app.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
