// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// gatedOptions is a binary's options with a --feature-gates gate.
type gatedOptions struct {
	gate featuregate.MutableVersionedFeatureGate
	ran  bool
}

func (o *gatedOptions) FeatureGate() featuregate.MutableVersionedFeatureGate { return o.gate }
func (o *gatedOptions) AddFlags(*pflag.FlagSet)                              {}
func (o *gatedOptions) Complete() error                                      { return nil }
func (o *gatedOptions) Validate() error                                      { return nil }
func (o *gatedOptions) Run(context.Context) error                            { o.ran = true; return nil }

// TestNewCommandDoubledFeatureGate: a binary whose gate already defines a
// logging feature differently gets an error naming it when the command runs,
// not a panic: the library never panics on its caller's input.
func TestNewCommandDoubledFeatureGate(t *testing.T) {
	gate := featuregate.NewFeatureGate()
	if err := gate.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		logsapi.ContextualLogging: {Default: false, PreRelease: featuregate.Alpha},
	}); err != nil {
		t.Fatal(err)
	}
	o := &gatedOptions{gate: gate}
	cmd := NewCommand("gated", "a binary with a doubled gate", o)
	cmd.SetArgs(nil)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--feature-gates") || !strings.Contains(err.Error(), string(logsapi.ContextualLogging)) {
		t.Fatalf("got %v, want an error naming --feature-gates and %s", err, logsapi.ContextualLogging)
	}
	if o.ran {
		t.Error("Run was called despite the broken gate")
	}
}
