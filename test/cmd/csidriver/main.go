// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command csidriver serves the test CSI driver (package csidriver: a
// stateful controller plugin, volumes in memory) on a unix socket, as a CSI
// driver container beside csi-provisioner does in a real pod. test/e2e runs
// it as the csi-driver container of csi/deploy.
//
//	csidriver --endpoint=unix:///run/csi/socket --name=example.csi.vendor.com
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kubeprov/external-storage/test/csidriver"
)

func main() {
	endpoint := flag.String("endpoint", "unix:///run/csi/socket", "unix socket to serve on")
	name := flag.String("name", "example.csi.vendor.com", "driver name GetPluginInfo returns")
	flag.Parse()
	path, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok {
		fmt.Fprintf(os.Stderr, "csidriver: --endpoint must be unix://<path>, not %q\n", *endpoint)
		os.Exit(2)
	}
	d := csidriver.New(csidriver.Options{Name: *name})
	if err := d.Start(path); err != nil {
		fmt.Fprintf(os.Stderr, "csidriver: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("csidriver: %s serving on %s\n", *name, path)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	d.Stop()
}
