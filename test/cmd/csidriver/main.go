// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command csidriver serves the test CSI driver (package csidriver: a
// stateful controller plugin) on a unix socket, as a CSI driver container
// beside csi-provisioner does in a real pod. test/e2e runs it as the
// csi-driver container of csi/deploy, with its volumes in memory; the csi
// integration tests run it with CSI_TEST_DRIVER=process, its volumes on disk
// (--statedir), and kill it.
//
//	csidriver --endpoint=unix:///run/csi/socket --name=example.csi.vendor.com [--statedir=/csi-data-dir]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kubeprov/external-storage/test/csidriver"
)

func main() {
	opts := csidriver.Options{Name: "example.csi.vendor.com"}
	endpoint := flag.String("endpoint", "unix:///run/csi/socket", "unix socket to serve on")
	opts.AddFlags(flag.CommandLine)
	flag.Parse()
	path, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok {
		fmt.Fprintf(os.Stderr, "csidriver: --endpoint must be unix://<path>, not %q\n", *endpoint)
		os.Exit(2)
	}
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	opts.Logf = logger.Printf
	d, err := csidriver.New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "csidriver: %v\n", err)
		os.Exit(1)
	}
	if err := d.Start(path); err != nil {
		fmt.Fprintf(os.Stderr, "csidriver: %v\n", err)
		os.Exit(1)
	}
	where := "in memory"
	if opts.StateDir != "" {
		where = "in " + opts.StateDir
	}
	logger.Printf("%s serving on %s, %d volumes %s", opts.Name, path, len(d.Volumes()), where)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	d.Stop()
}
