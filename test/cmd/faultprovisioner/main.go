// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command faultprovisioner runs the library's controller over a directory
// store as a real process, so tests can kill it at exact moments. With
// --hang-pv-create-marker it never completes a PV create: it writes the
// marker file when the first create is sent and then waits forever, which
// holds the process exactly between Provision returning and the PV being
// saved.
package main

import (
	"context"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

func main() {
	common := cli.NewCommon()
	var name, root, marker string
	cmd := cli.NewCommand("faultprovisioner", "Directory provisioner for fault tests",
		func(fs *pflag.FlagSet) {
			common.AddFlags(fs)
			fs.StringVar(&name, "provisioner", "test.kubeprov.io/fault", "Provisioner name.")
			fs.StringVar(&root, "root", "", "Directory holding the assets.")
			fs.StringVar(&marker, "hang-pv-create-marker", "", "If set, PV creates hang after writing this file.")
		},
		common.Validate,
		func(ctx context.Context) error {
			clients, err := common.NewClients("faultprovisioner")
			if err != nil {
				return err
			}
			if marker != "" {
				cfg := rest.CopyConfig(clients.Config)
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &hangPVCreates{next: rt, marker: marker} })
				if clients.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
					return err
				}
			}
			store, err := dirstore.New(root)
			if err != nil {
				return err
			}
			return common.Run(ctx, clients, name, store, cli.RunOptions{})
		})
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}

type hangPVCreates struct {
	next   http.RoundTripper
	marker string
}

func (h *hangPVCreates) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/persistentvolumes") {
		_ = os.WriteFile(h.marker, []byte(r.URL.Path), 0o644)
		<-r.Context().Done() // the test kills the process while it waits here
		return nil, r.Context().Err()
	}
	return h.next.RoundTrip(r)
}
