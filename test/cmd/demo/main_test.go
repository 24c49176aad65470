// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprov/external-storage/test/framework"
)

// TestMain does what main does before the demo runs: without a logger,
// controller-runtime prints a stack trace when envtest first logs after a
// cold build.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestDemo runs `make demo` as a newcomer would and checks that it told the
// whole story.
func TestDemo(t *testing.T) {
	var out strings.Builder
	d := &demo{out: &out, start: time.Now()}
	err := d.run(framework.TestContext(t, framework.DefaultRunMainStartTimeout))
	t.Logf("demo output:\n%s", out.String())
	if errors.Is(err, errControlPlane) {
		framework.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pod/hostpath-example   Succeeded   node-1",
		"persistentvolumeclaim/hostpath-example   Bound",
		" SUCCESS\n",
		"its directory on the node are gone",
		"Stopped the cluster",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
}
