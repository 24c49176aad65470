// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cinder tests cinder-provisioner against a real Cinder (API,
// scheduler, volume service, RabbitMQ, sqlite) with a test volume driver
// that answers like iSCSI, RBD and Fibre Channel backends, and the real
// Kubernetes control plane.
package cinder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/lib/controller"
	cinderbackend "github.com/kubeprov/external-storage/test/backend/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// provisionerName is served by the in-process controller.
	provisionerName = "kubeprov.io/standalone-cinder-it"
	identity        = provisionerName + "/integration"
	initiatorName   = "iqn.2026-01.io.kubeprov:integration"
)

// Shared by the tests of this package.
var (
	cp        *framework.ControlPlane
	cinderAPI *cinderbackend.Stack
	volClient *gophercloud.ServiceClient
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cinder-it: "+format+"\n", args...)
}

// run starts Cinder and the control plane (at once: Cinder's ~40 s start is
// the long pole), the provisioner, the tests, and stops everything it
// started. A component that cannot start fails under CI=true and skips
// otherwise. On SIGINT or SIGTERM it stops everything and exits 1: during
// the start by canceling it (the starters clean up after themselves),
// during the tests at once, as nothing else would stop the processes.
func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu           sync.Mutex // guards stoppers and testsRunning
		stoppers     []func() error
		testsRunning bool
	)
	// stopAll stops what was started, newest first; call it with mu held.
	stopAll := func() int {
		code := 0
		for i := len(stoppers) - 1; i >= 0; i-- {
			if err := stoppers[i](); err != nil {
				logf("stopping: %v", err)
				code = 1
			}
		}
		stoppers = nil
		return code
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		sig, ok := <-signals
		if !ok {
			return
		}
		logf("%v: stopping Cinder and the control plane", sig)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if testsRunning {
			stopAll()
			os.Exit(1)
		}
	}()
	// failStart ends a start that did not work.
	failStart := func(err error) int {
		mu.Lock()
		defer mu.Unlock()
		code := stopAll()
		if ctx.Err() != nil {
			logf("FAIL: interrupted while starting: %v", err)
			return 1
		}
		return max(code, framework.MainUnavailable(m, "Cinder and the control plane", err))
	}

	var wg sync.WaitGroup
	var stackErr, cpErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		cinderAPI, stackErr = cinderbackend.StartStack(ctx, cinderbackend.StackOptions{ISCSITarget: true, Log: logf})
	}()
	go func() {
		defer wg.Done()
		cp, cpErr = framework.Start(ctx, framework.Options{AuditLog: true, Log: func(f string, a ...any) { logf("framework: "+f, a...) }})
	}()
	wg.Wait()
	mu.Lock()
	if cinderAPI != nil {
		stoppers = append(stoppers, cinderAPI.Stop)
	}
	if cp != nil {
		stoppers = append(stoppers, cp.Stop)
	}
	mu.Unlock()
	if err := errors.Join(stackErr, cpErr); err != nil {
		return failStart(err)
	}
	var err error
	if volClient, err = cinderAPI.Client(); err != nil {
		return failStart(err)
	}
	ctrlCtx, stopCtrl := context.WithCancel(klog.NewContext(ctx, klog.Background().WithName("cinder-provisioner")))
	ctrlDone, err := startProvisioner(ctrlCtx)
	if err != nil {
		stopCtrl()
		return failStart(err)
	}
	mu.Lock()
	stoppers = append(stoppers, func() error { stopCtrl(); <-ctrlDone; return nil })
	// A signal that came during the start has canceled ctx already.
	if ctx.Err() != nil {
		mu.Unlock()
		return failStart(ctx.Err())
	}
	testsRunning = true
	mu.Unlock()

	code := m.Run()
	// Whatever a test did, nothing may be left in Cinder.
	if code == 0 {
		if err := checkNoVolumesLeft(ctx); err != nil {
			logf("FAIL: %v", err)
			code = 1
		}
	}
	mu.Lock()
	defer mu.Unlock()
	testsRunning = false
	return max(code, stopAll())
}

// startProvisioner runs the provisioner in-process with short retries.
func startProvisioner(ctx context.Context) (<-chan struct{}, error) {
	p, err := cinderprov.New(volClient, cp.Client, identity,
		cinderprov.WithConnector(cinderprov.Connector{Initiator: initiatorName, Host: "kubeprov-it", Platform: cinderprov.DefaultPlatform(), OSType: cinderprov.DefaultOSType}),
		cinderprov.WithPollInterval(200*time.Millisecond),
		cinderprov.WithTopologyKey(cinderprov.ZoneTopologyKey))
	if err != nil {
		return nil, err
	}
	ctrl, err := controller.NewProvisionController(cp.Client, provisionerName, p,
		controller.WithRetryInterval(200*time.Millisecond, 2*time.Second),
		controller.WithOperationTimeout(2*time.Minute),
		controller.WithResyncPeriod(0),
		controller.WithEventFlushInterval(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ctrl.Run(ctx); err != nil {
			logf("controller stopped: %v", err)
		}
	}()
	return done, nil
}

// checkNoVolumesLeft waits a little for rollbacks still running, then
// fails if Cinder holds any volume.
func checkNoVolumesLeft(ctx context.Context) error {
	var vols []volumes.Volume
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		vols, err = cinderAPI.Volumes(ctx)
		return err == nil && len(vols) == 0, nil
	})
	if vols == nil && err != nil {
		return fmt.Errorf("listing Cinder volumes: %w", err)
	}
	if len(vols) > 0 {
		var left []string
		for _, v := range vols {
			left = append(left, fmt.Sprintf("%s (%s, %s)", v.ID, v.Name, v.Status))
		}
		return fmt.Errorf("volumes left in Cinder: %v", left)
	}
	return nil
}
