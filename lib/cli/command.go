// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
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
// SIGTERM. Long flags may also be spelled with one dash, as Go's flag package
// allows (see LongFlagsWithOneDash).
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
		SilenceUsage:  true,
		SilenceErrors: false,
		// Parsed in RunE, after LongFlagsWithOneDash: cobra has no hook
		// before its own parsing.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := parseFlags(cmd, args); done || err != nil {
				return err
			}
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
	o.AddFlags(cmd.Flags())
	logsapi.AddFlags(logging, cmd.Flags())
	return cmd
}

// parseFlags does what cobra does when it parses the flags itself: the flags,
// then --help and --version, then no positional arguments. done means the
// command has nothing more to do (help or version printed).
func parseFlags(cmd *cobra.Command, args []string) (done bool, err error) {
	fs := cmd.Flags()
	if err := fs.Parse(LongFlagsWithOneDash(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, cmd.Help()
		}
		return true, cmd.FlagErrorFunc()(cmd, err)
	}
	if help, _ := fs.GetBool("help"); help {
		return true, cmd.Help()
	}
	if version, _ := fs.GetBool("version"); version {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", cmd.Name(), cmd.Version)
		return true, err
	}
	return false, cobra.NoArgs(cmd, fs.Args())
}
