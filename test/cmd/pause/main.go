// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pause is the sandbox ("pause") container of test/cluster's nodes:
// it holds a pod's namespaces and does nothing until it is stopped. The
// upstream image cannot be pulled here; this is its behavior in Go.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
