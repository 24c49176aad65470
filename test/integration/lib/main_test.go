// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package lib proves the ProvisionController against the real control plane:
// binding, deletion, reclaim policies, topology, leader election, API server
// restarts and process kills.
package lib

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/internal/dirstore"
)

var (
	cp *framework.ControlPlane
	// client has a high QPS so that tests are limited by the controller, not by themselves.
	client kubernetes.Interface
	// faultBinary is test/cmd/faultprovisioner, built once.
	faultBinary string
	names       atomic.Int64
)

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{AuditLog: true}, func(c *framework.ControlPlane) {
		cp = c
		cfg := c.RestConfig()
		cfg.QPS, cfg.Burst = 500, 1000
		client = kubernetes.NewForConfigOrDie(cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var err error
		if faultBinary, err = framework.BuildBinary(ctx, "test", "faultprovisioner"); err != nil {
			panic(err)
		}
	})
}

// uniqueName gives each test a provisioner name (and with it a journal and a
// Lease) of its own, so tests never see each other's claims.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d.test.kubeprov.io/dir", prefix, names.Add(1))
}

// testOptions make retries and event flushes fast enough for tests.
func testOptions(extra ...controller.Option) []controller.Option {
	return append([]controller.Option{
		controller.WithRetryInterval(100*time.Millisecond, 2*time.Second),
		controller.WithEventFlushInterval(100 * time.Millisecond),
		controller.WithThreadiness(8),
	}, extra...)
}

// runController runs a controller in this process until the test ends (or
// the returned stop is called) and fails the test if Run returns an error
// other than through stop.
func runController(t *testing.T, name string, p controller.Provisioner, opts ...controller.Option) (stop func()) {
	t.Helper()
	return runControllerAs(t, client, name, p, opts...)
}

// runControllerAs is runController with the controller's own client (of
// another user than the admin).
func runControllerAs(t *testing.T, client kubernetes.Interface, name string, p controller.Provisioner, opts ...controller.Option) (stop func()) {
	t.Helper()
	_, stop = startControllerAs(t, client, name, p, opts...)
	return stop
}

// startControllerAs is runControllerAs that also returns the controller,
// for tests that ask it about its readiness.
func startControllerAs(t *testing.T, client kubernetes.Interface, name string, p controller.Provisioner, opts ...controller.Option) (*controller.ProvisionController, func()) {
	t.Helper()
	c, err := controller.NewProvisionController(client, name, p, testOptions(opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var stopped atomic.Bool
	stop := func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller %s: Run returned %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("controller %s did not stop within 30s", name)
		}
	}
	t.Cleanup(stop)
	return c, stop
}

func newStore(t *testing.T) *dirstore.Store {
	t.Helper()
	s, err := dirstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
