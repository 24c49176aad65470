// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	goflag "flag"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/version"
)

// NewCommand returns the cobra command of a provisioner binary: flags added
// by addFlags (then overridable from the environment), klog's -v, --version,
// no positional arguments, and a context that ends on SIGINT or SIGTERM.
// validate runs after the environment is applied; run does the work.
func NewCommand(use, short string, addFlags func(*pflag.FlagSet), validate func() error, run func(ctx context.Context) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:           use,
		Short:         short,
		Version:       version.String(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ApplyEnv(cmd.Flags()); err != nil {
				return err
			}
			if err := validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx = klog.NewContext(ctx, klog.Background().WithName(use))
			defer klog.Flush()
			return run(ctx)
		},
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	addFlags(cmd.Flags())
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlag(klogFlags.Lookup("v"))
	return cmd
}
