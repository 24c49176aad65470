// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command faultprovisioner runs the library's controller as a real process
// over a directory store (or, with --noop, an in-memory one), so that tests
// can kill it at exact moments and benchmarks can measure it as users run
// it. Every API request it makes is counted in the metric
// test_client_requests_total{client,verb,resource}.
//
// With --hang-pv-create-marker it never completes a PV create: it writes the
// marker file when the first create is sent and then waits, which holds the
// process exactly between Provision returning and the PV being saved.
package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

func main() {
	common := cli.NewCommon()
	var name, root, marker string
	var noop bool
	cmd := cli.NewCommand("faultprovisioner", "Directory provisioner for fault tests and benchmarks",
		func(fs *pflag.FlagSet) {
			common.AddFlags(fs)
			fs.StringVar(&name, "provisioner", "test.kubeprov.io/fault", "Provisioner name.")
			fs.StringVar(&root, "root", "", "Directory holding the assets.")
			fs.BoolVar(&noop, "noop", false, "Keep assets in memory instead of directories.")
			fs.StringVar(&marker, "hang-pv-create-marker", "", "If set, PV creates hang after writing this file.")
		},
		common.Validate,
		func(ctx context.Context) error {
			registry := prometheus.NewRegistry()
			requests := prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "test_client_requests_total", Help: "API requests by client, verb and resource.",
			}, []string{"client", "verb", "resource"})
			registry.MustRegister(requests)
			clients, err := common.NewClients("faultprovisioner")
			if err != nil {
				return err
			}
			wrap := func(client string, hang bool) (kubernetes.Interface, error) {
				cfg := rest.CopyConfig(clients.Config)
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
					return &instrumented{next: rt, client: client, requests: requests, marker: map[bool]string{true: marker}[hang]}
				})
				return kubernetes.NewForConfig(cfg)
			}
			if clients.Kube, err = wrap("main", marker != ""); err != nil {
				return err
			}
			if clients.Events, err = wrap("events", false); err != nil {
				return err
			}
			var p controller.Provisioner = &memoryStore{}
			if !noop {
				if p, err = dirstore.New(root); err != nil {
					return err
				}
			}
			return common.Run(ctx, clients, name, p, cli.RunOptions{Registry: registry})
		})
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}

// instrumented counts requests and can hold PV creates.
type instrumented struct {
	next     http.RoundTripper
	client   string
	requests *prometheus.CounterVec
	marker   string
}

func (i *instrumented) RoundTrip(r *http.Request) (*http.Response, error) {
	verb := strings.ToLower(r.Method)
	if r.URL.Query().Get("watch") == "true" {
		verb = "watch"
	}
	i.requests.WithLabelValues(i.client, verb, resourceOf(r.URL.Path)).Inc()
	if i.marker != "" && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/persistentvolumes") {
		_ = os.WriteFile(i.marker, []byte(r.URL.Path), 0o644)
		<-r.Context().Done() // the test kills the process while it waits here
		return nil, r.Context().Err()
	}
	return i.next.RoundTrip(r)
}

// resourceOf returns the resource of an API path such as
// /api/v1/namespaces/ns/persistentvolumeclaims/name.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		switch parts[i] {
		case "persistentvolumes", "persistentvolumeclaims", "storageclasses", "events", "configmaps", "leases":
			return parts[i]
		}
	}
	return "other"
}

// memoryStore is a provisioner that does no I/O: the benchmark measures the
// controller, not a backend.
type memoryStore struct{ assets sync.Map }

func (m *memoryStore) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	m.assets.Store(o.PVName, true)
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/noop/" + o.PVName}},
	}), controller.ProvisioningFinished, nil
}

func (m *memoryStore) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	m.assets.Delete(pv.Name)
	return nil
}
