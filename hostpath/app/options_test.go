// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"strings"
	"testing"
	"time"

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
		{[]string{"--node-name=n", "--enable-capacity"}, `--enable-capacity needs a --provisioner that can name a CSIDriver object (a DNS subdomain such as hostpath.example.com), got "kubeprov.io/hostpath"`},
		{[]string{"--node-name=n", "--enable-capacity", "--provisioner=Hostpath.Example"}, "set --provisioner (and the StorageClasses' provisioner) to such a name, or drop --enable-capacity"},
		{[]string{"--node-name=n", "--enable-capacity", "--provisioner=hostpath.example.com", "--capacity-poll-interval=0"}, "--capacity-poll-interval must be positive"},
	} {
		_, err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestCapacityFlags(t *testing.T) {
	o, err := parse(t, "--node-name=n", "--enable-capacity", "--provisioner=hostpath.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !o.EnableCapacity || o.CapacityPollInterval != time.Minute {
		t.Errorf("--enable-capacity %v, --capacity-poll-interval %v: want true and the CSI sidecar's default, 1m", o.EnableCapacity, o.CapacityPollInterval)
	}
	if o, err = parse(t, "--node-name=n"); err != nil || o.EnableCapacity {
		t.Errorf("default --enable-capacity = %v (%v), want false", o.EnableCapacity, err)
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

func TestConfigFlags(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/good.json"
	bad := dir + "/bad.json"
	if err := os.WriteFile(good, []byte(`{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/opt/lp"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"nodePathMap":[{"node":"n1","paths":["opt"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parse(t, "--node-name=n1", "--config="+good, "--node-label-key=example.com/host", "--config-reload-interval=3s")
	if err != nil {
		t.Fatal(err)
	}
	if o.Config != good || o.NodeLabelKey != "example.com/host" || o.ConfigReloadInterval.String() != "3s" {
		t.Errorf("options: %+v", o)
	}
	if d, _ := parse(t, "--node-name=n1"); d.NodeLabelKey != "kubernetes.io/hostname" || d.ConfigReloadInterval.String() != "10s" {
		t.Errorf("defaults: %+v", d)
	}
	for args, want := range map[string]string{
		"--config=" + bad:                `--config: ` + bad + `: invalid configuration: node n1: path "opt" must be absolute`,
		"--config=" + dir + "/none.json": "--config: invalid configuration: open",
		"--node-label-key=":              "--node-label-key must not be empty",
		"--config-reload-interval=0s":    "--config-reload-interval must be positive",
	} {
		if _, err := parse(t, "--node-name=n1", args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
}

func TestHelperPlacementFlags(t *testing.T) {
	o, err := parse(t, "--node-name=n1", "--helper-pods", "--helper-pods-per-namespace=2", "--helper-node-selector=storage=local,zone=a",
		"--helper-toleration=node-role.kubernetes.io/control-plane:NoSchedule", "--helper-toleration=gpu=nvidia")
	if err != nil {
		t.Fatal(err)
	}
	tolerations, err := o.helperTolerations()
	if err != nil || len(tolerations) != 2 || tolerations[1].Value != "nvidia" || o.HelperPodsPerNS != 2 || o.HelperNodeSelector["zone"] != "a" {
		t.Errorf("options %+v, tolerations %+v, %v", o, tolerations, err)
	}
	if d, _ := parse(t, "--node-name=n1", "--helper-pods"); d.HelperPodsPerNS != 4 || len(d.HelperTolerations) != 0 || len(d.HelperNodeSelector) != 0 {
		t.Errorf("defaults: %+v", d)
	}
	for args, want := range map[string]string{
		"--helper-pods-per-namespace=0":    "--helper-pods-per-namespace must be at least 1",
		"--helper-toleration=:NoSchedule":  "needs a taint key: helper pods never tolerate every taint",
		"--helper-toleration=gpu:Never":    `effect "Never" must be NoSchedule`,
		"--helper-node-selector=bad key=x": `--helper-node-selector: nodeSelector: Invalid value: "bad key"`,
	} {
		if _, err := parse(t, "--node-name=n1", "--helper-pods", args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
}
