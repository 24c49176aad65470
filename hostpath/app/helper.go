// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
)

// newHelperCommand is the subcommand helper pods run: make or remove one
// directory under the configured path mounted into the pod, re-checking the
// request there, and report through the termination message.
func newHelperCommand() *cobra.Command {
	var (
		roots       []string
		rel         string
		mode        = hostpath.DefaultDirMode
		sizeBytes   int64
		mustBeEmpty bool
	)
	cmd := &cobra.Command{
		Use:          hostpath.HelperSubcommand + " " + hostpath.HelperCreate + "|" + hostpath.HelperRemove + "|" + hostpath.HelperCheck,
		Short:        "Make, remove or check one volume directory (run by helper pods, not by hand)",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := hostpath.HelperRequest{
				Action: args[0], Roots: roots, Rel: rel, Mode: mode, SizeBytes: sizeBytes, MustBeEmpty: mustBeEmpty,
			}
			res := hostpath.RunHelper(cmd.Context(), req)
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(cmd.OutOrStdout(), string(b)); err != nil {
				return err
			}
			if path := os.Getenv(hostpath.EnvHelperTerminationLog); path != "" {
				// The kubelet's file, named by the pod spec this provisioner wrote.
				if err := os.WriteFile(path, b, 0o600); err != nil { //nolint:gosec // G703: see above
					return fmt.Errorf("writing the termination message: %w", err)
				}
			}
			if res.Error != "" {
				return errors.New(res.Error)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&roots, "root", nil, "A configured path mounted into the pod (create: each candidate, the one with the most free space wins; remove: exactly one).")
	fs.StringVar(&rel, "rel", "", "The volume directory, relative to the root; no '..', no absolute path.")
	fs.Var((*octalMode)(&mode), "mode", "Permission bits of the new directory, in octal.")
	fs.Int64Var(&sizeBytes, "size-bytes", 0, "The claim's request: the root must have this much free; 0 skips the check.")
	fs.BoolVar(&mustBeEmpty, "must-be-empty", false, "Refuse an existing directory that holds files.")
	return cmd
}
