// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command flex-provisioner provisions PersistentVolumes with a driver
// executable or a provisioning container image.
package main

import (
	"os"

	"github.com/kubeprov/external-storage/flex/app"
)

func main() {
	if err := app.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
