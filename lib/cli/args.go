// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"strings"

	"github.com/spf13/pflag"
)

// LongFlagsWithOneDash rewrites "-name" and "-name=value" into "--name..."
// wherever name is a long flag of fs. The CSI sidecars and the classic
// provisioners parse with Go's flag package, which accepts both spellings, so
// manifests written for them carry "-csi-address=..." or "-provisioner=...";
// pflag would read those as a cluster of one-letter flags and fail. Anything
// else is kept as it is: one-letter flags (-v=5), clusters of them, a value
// following a flag that takes one, and everything after "--".
func LongFlagsWithOneDash(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	valueNext := false // the previous argument is a flag whose value is this one
	for i, arg := range args {
		if valueNext {
			valueNext = false
			out = append(out, arg)
			continue
		}
		if arg == "--" {
			return append(out, args[i:]...)
		}
		name, long := flagName(arg)
		if f := fs.Lookup(name); f != nil && len(name) > 1 {
			if !long {
				arg = "-" + arg
			}
			valueNext = !strings.Contains(arg, "=") && f.NoOptDefVal == ""
		}
		out = append(out, arg)
	}
	return out
}

// flagName is the flag an argument names ("" for none) and whether it is
// spelled with two dashes.
func flagName(arg string) (name string, long bool) {
	switch {
	case strings.HasPrefix(arg, "--"):
		name, long = arg[2:], true
	case strings.HasPrefix(arg, "-"):
		name = arg[1:]
	default:
		return "", false
	}
	name, _, _ = strings.Cut(name, "=")
	return name, long
}
