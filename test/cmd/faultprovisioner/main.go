// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command faultprovisioner runs the library's controller as a real process
// over a directory store (or, with --noop, an in-memory one), so that tests
// can kill it at exact moments and benchmarks can measure it as users run
// it (the benchmark counts its requests with a proxy in front of
// kube-apiserver).
//
// With --hang-pv-create-marker it never completes a PV create: it writes the
// marker file when the first create is sent and then waits, which holds the
// process exactly between Provision returning and the PV being saved.
//
// With --in-background-prefix and --in-background-for the in-memory
// provisioner is a slow backend for the claims whose name starts with the
// prefix: it answers ProvisioningInBackground until that long after it was
// first asked for their volume.
package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

type options struct {
	cli.Common
	root, marker string
	noop         bool
	slowPrefix   string
	slowFor      time.Duration
}

func (o *options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.root, "root", "", "Directory holding the assets.")
	fs.BoolVar(&o.noop, "noop", false, "Keep assets in memory instead of directories.")
	fs.StringVar(&o.marker, "hang-pv-create-marker", "", "If set, PV creates hang after writing this file.")
	fs.StringVar(&o.slowPrefix, "in-background-prefix", "", "With --noop: claims whose name starts with this are provisioned in the background.")
	fs.DurationVar(&o.slowFor, "in-background-for", time.Minute, "How long a volume of --in-background-prefix takes, from the first Provision call.")
}

func (o *options) Run(ctx context.Context) error {
	clients, err := o.NewClients("faultprovisioner")
	if err != nil {
		return err
	}
	if o.marker != "" {
		cfg := cli.BuiltinConfig(clients.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &hangPVCreates{next: rt, marker: o.marker} })
		if clients.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	var p controller.Provisioner = &memoryStore{slowPrefix: o.slowPrefix, slowFor: o.slowFor}
	if !o.noop {
		if p, err = dirstore.New(o.root); err != nil {
			return err
		}
	}
	return o.Common.Run(ctx, clients, o.Provisioner, p, cli.RunOptions{})
}

func main() {
	o := &options{Common: cli.NewCommon("test.kubeprov.io/fault")}
	if err := cli.NewCommand("faultprovisioner", "Directory provisioner for fault tests and benchmarks", o).Execute(); err != nil {
		os.Exit(1)
	}
}

// hangPVCreates holds PV creates: it writes the marker and waits until the
// test kills the process.
type hangPVCreates struct {
	next   http.RoundTripper
	marker string
}

func (h *hangPVCreates) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/persistentvolumes") {
		_ = os.WriteFile(h.marker, []byte(r.URL.Path), 0o644)
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return h.next.RoundTrip(r)
}

// memoryStore is a provisioner that does no I/O: the benchmark measures the
// controller, not a backend.
type memoryStore struct {
	assets sync.Map
	// Claims named slowPrefix... take slowFor from the first call (started).
	slowPrefix string
	slowFor    time.Duration
	started    sync.Map
}

func (m *memoryStore) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	m.assets.Store(o.PVName, true)
	if m.slowPrefix != "" && strings.HasPrefix(o.PVC.Name, m.slowPrefix) {
		started, _ := m.started.LoadOrStore(o.PVName, time.Now())
		if time.Since(started.(time.Time)) < m.slowFor {
			return nil, controller.ProvisioningInBackground, errors.New("the backend is still creating the volume")
		}
	}
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/noop/" + o.PVName}},
	}), controller.ProvisioningFinished, nil
}

func (m *memoryStore) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	m.assets.Delete(pv.Name)
	return nil
}
