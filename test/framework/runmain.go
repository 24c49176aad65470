// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultRunMainStartTimeout bounds Start in RunMain; it covers a cold build of
// the binaries. Note that `go test` kills a test binary -timeout (default 10m)
// plus one minute after it starts: on a cold cache run hack/controlplane.sh first
// or pass a larger -timeout.
const DefaultRunMainStartTimeout = 30 * time.Minute

// RunMain is for TestMain: it starts a control plane, hands it to set (which
// usually stores it in a package variable), runs the tests and stops the control
// plane before exiting with the tests' status.
//
// If the control plane cannot start, under CI=true it prints the error and exits 1
// (a test that needs a component must fail loudly there); otherwise it prints
// "SKIP: <reason>" and exits 0 without running any test (so that go test reports
// "[no tests to run]" rather than a plain "ok"). An interrupt (SIGINT,
// SIGTERM) stops the control plane, whose processes run in their own process
// groups and would otherwise outlive the test binary, and exits 1.
//
// Progress goes to stderr unless opts.Log is set.
func RunMain(m *testing.M, opts Options, set func(*ControlPlane)) {
	os.Exit(runMain(m, opts, set))
}

func runMain(m *testing.M, opts Options, set func(*ControlPlane)) int {
	if opts.Log == nil {
		opts.Log = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "framework: "+format+"\n", args...)
		}
	}
	// envtest logs through controller-runtime's global logger, which otherwise
	// complains with a stack trace when first used after 30 s (a slow build).
	// RunMain owns the process like a main function, so it may set it.
	ctrllog.SetLogger(klog.Background())

	ctx, cancel := context.WithTimeout(context.Background(), DefaultRunMainStartTimeout)
	defer cancel()

	var (
		mu          sync.Mutex
		running     *ControlPlane
		interrupted = errors.New("interrupted")
	)
	ctx, cancelCause := context.WithCancelCause(ctx)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		sig := <-signals
		// During Start this makes Start fail and clean up; during the tests, stop
		// the control plane here since nothing else will.
		cancelCause(fmt.Errorf("%w by %v", interrupted, sig))
		mu.Lock()
		defer mu.Unlock()
		if running != nil {
			fmt.Fprintf(os.Stderr, "framework: %v, stopping the control plane\n", sig)
			if err := running.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "framework: stopping the control plane: %v\n", err)
			}
			os.Exit(1)
		}
	}()

	cp, err := Start(ctx, opts)
	if err == nil {
		mu.Lock()
		running = cp
		mu.Unlock()
		// A signal that arrived between Start returning and the line above found
		// nothing to stop.
		if errors.Is(context.Cause(ctx), interrupted) {
			err = context.Cause(ctx)
			_ = cp.Stop()
		}
	}
	if err != nil {
		if errors.Is(context.Cause(ctx), interrupted) {
			fmt.Fprintf(os.Stderr, "FAIL: %v while starting the control plane: %v\n", context.Cause(ctx), err)
			return 1
		}
		return MainUnavailable(m, "the control plane", err)
	}

	set(cp)
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	running = nil // a late signal must not exit with a different status
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// MainUnavailable is Unavailable for a TestMain that cannot start what its
// package's tests need: the exit code of a failure under CI=true, else of a
// package that runs no test.
func MainUnavailable(m *testing.M, what string, err error) int {
	if os.Getenv("CI") == "true" {
		fmt.Fprintf(os.Stderr, "FAIL: cannot start %s (CI=true, so not skipping): %v\n", what, err)
		return 1
	}
	fmt.Printf("SKIP: cannot start %s (set CI=true to fail instead): %v\n", what, err)
	// go test hides a passing package's output unless -v; running no tests
	// makes it say "[no tests to run]" instead of a plain "ok".
	flag.Parse()
	if err := flag.Set("test.run", "^$"); err != nil {
		return 0
	}
	return m.Run()
}
