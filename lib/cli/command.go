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

// NewCommand returns the cobra command of a provisioner binary: the flags of
// o (then overridable from the environment), klog's -v, --version, no
// positional arguments, and a context that ends on SIGINT or SIGTERM.
func NewCommand(use, short string, o Options) *cobra.Command {
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
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx = klog.NewContext(ctx, klog.Background().WithName(use))
			defer klog.Flush()
			return o.Run(ctx)
		},
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	o.AddFlags(cmd.Flags())
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlag(klogFlags.Lookup("v"))
	return cmd
}
