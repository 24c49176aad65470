// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/version"
)

// Options is the shape of every provisioner binary's options (see
// docs/development.md, "A provisioner binary"): flags with their defaults,
// then, once the command line and the environment are read, Complete fills
// in what derives from other values or from files, Validate checks without
// changing anything and names the flag at fault, and Run does the work.
type Options interface {
	AddFlags(fs *pflag.FlagSet)
	Complete() error
	Validate() error
	Run(ctx context.Context) error
}

// FeatureGated is implemented by options that have --feature-gates. The
// logging feature gates (LoggingAlphaOptions, LoggingBetaOptions,
// ContextualLogging) are added to the gate before AddFlags, and the logging
// flags are checked against it, as in the Kubernetes components.
type FeatureGated interface {
	FeatureGate() featuregate.MutableVersionedFeatureGate
}

// NewCommand returns the cobra command of a provisioner binary: the flags of
// o (then overridable from the environment), the Kubernetes components'
// logging flags (-v, --vmodule, --logging-format=text|json, ...),
// --version, no positional arguments, and a context that ends on SIGINT or
// SIGTERM.
func NewCommand(use, short string, o Options) *cobra.Command {
	// The logging configuration is process-wide: a second command in one
	// process (a test) may apply the same one again, not another.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	logging := logsapi.NewLoggingConfiguration()
	var gate featuregate.FeatureGate
	var gateErr error
	if fg, ok := o.(FeatureGated); ok {
		// Fails only for a gate the binary already defines differently: a bug
		// of the binary, which the command reports when run instead of
		// panicking in its constructor.
		if err := logsapi.AddFeatureGates(fg.FeatureGate()); err != nil {
			gateErr = fmt.Errorf("--feature-gates: adding the logging feature gates: %w", err)
		}
		gate = fg.FeatureGate()
	}
	cmd := &cobra.Command{
		Use:           use,
		Short:         short,
		Version:       version.String(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if gateErr != nil {
				return gateErr
			}
			if err := ApplyEnv(cmd.Flags()); err != nil {
				return err
			}
			if err := logsapi.ValidateAndApply(logging, gate); err != nil {
				return err
			}
			defer klog.Flush()
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx = klog.NewContext(ctx, klog.Background().WithName(use))
			return o.Run(ctx)
		},
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	o.AddFlags(cmd.Flags())
	logsapi.AddFlags(logging, cmd.Flags())
	return cmd
}
