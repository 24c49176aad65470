// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubeprov/external-storage/lib/cli"
)

// parse does what the command does before running: flags, then environment,
// then validation.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet(BinaryName, pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := cli.ApplyEnv(fs); err != nil {
		return o, err
	}
	return o, o.Validate()
}

func TestDefaults(t *testing.T) {
	o, err := parse(t, "--node-name=n1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Provisioner != "kubeprov.io/hostpath" || o.PVDir != "/tmp/hostpath-provisioner" || o.DirMode != 0o777 || o.NodeLocal || o.LeaderElection {
		t.Errorf("defaults: %+v", o)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("NODE_NAME", "from-env")
	t.Setenv("DIR_MODE", "0750")
	t.Setenv("NODE_LOCAL", "true")
	t.Setenv("PV_DIR", "/var/lib/volumes")
	t.Setenv("PROVISIONER", "example.com/dirs")
	o, err := parse(t, "--pv-dir=/flag/wins")
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeName != "from-env" || o.DirMode != 0o750 || !o.NodeLocal || o.PVDir != "/flag/wins" || o.Provisioner != "example.com/dirs" {
		t.Errorf("options: %+v", o)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--node-name (or NODE_NAME) is required"},
		{[]string{"--node-name=n", "--pv-dir=volumes"}, `--pv-dir must be an absolute path, got "volumes"`},
		{[]string{"--node-name=n", "--provisioner="}, "--provisioner must not be empty"},
		{[]string{"--node-name=n", "--node-local", "--leader-election"}, "--leader-election cannot be combined with --node-local"},
		{[]string{"--node-name=n", "--dir-mode=1777"}, "only permission bits (0000 to 0777) are allowed"},
		{[]string{"--node-name=n", "--dir-mode=rwx"}, `"rwx" is not an octal number`},
		{[]string{"--node-name=n", "--worker-threads=0"}, "--worker-threads must be at least 1"},
	} {
		_, err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestDirModeString(t *testing.T) {
	o, err := parse(t, "--node-name=n", "--dir-mode=755")
	if err != nil {
		t.Fatal(err)
	}
	if got := (*octalMode)(&o.DirMode).String(); got != "0755" {
		t.Errorf("String() = %q, want 0755", got)
	}
}
