// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cloud.conf")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// execute runs the command with args and returns its error; it stops at
// Validate for every case here, before any client is built.
func execute(t *testing.T, args ...string) error {
	t.Helper()
	cmd := NewCommand()
	cmd.SetArgs(args)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	return cmd.Execute()
}

func TestValidateNamesTheFlag(t *testing.T) {
	good := writeConfig(t, "[Global]\ncinder-endpoint=http://127.0.0.1:8776/v3\ntenant-id=0123abcd\n")
	cases := map[string]struct {
		args []string
		want []string
	}{
		"unknown cloud config key": {
			args: []string{"--cloud-config", writeConfig(t, "[Global]\ncinder-endpoint=http://c/v3\ntenant-id=1\nendpoint-type=internal\n")},
			want: []string{"unknown key(s) endpoint-type in [Global]"},
		},
		"two clouds": {
			args: []string{"--cloud-config", good, "--cloud-name", "east", "--cloud-name", "west"},
			want: []string{"--cloud-name is given 2 times (east, west): one cinder-provisioner serves one cloud"},
		},
		"missing cloud": {
			args: []string{"--cloud-config", good, "--cloud-name", "east"},
			want: []string{`has no [Global "east"] section (--cloud-name); it has [Global]`},
		},
		"bad initiator": {
			args: []string{"--cloud-config", good, "--initiator-name", "node1"},
			want: []string{`--initiator-name "node1" is not an iqn., eui. or naa. name`},
		},
		"bad wwpn": {
			args: []string{"--cloud-config", good, "--wwpns", "50:0a:09:81:89:1b:8d:c5,xyz"},
			want: []string{`--wwpns: "xyz" is not a 16-digit WWPN`},
		},
		"bad provisioner and namespace": {
			args: []string{"--cloud-config", good, "--provisioner", "not a name!", "--chap-secret-namespace", "Bad_NS"},
			want: []string{`--provisioner "not a name!"`, `--chap-secret-namespace "Bad_NS"`},
		},
		"stuck creating timeout": {
			args: []string{"--cloud-config", good, "--stuck-creating-timeout", "0s"},
			want: []string{"--stuck-creating-timeout must be more than 0, got 0s"},
		},
		"topology key": {
			args: []string{"--cloud-config", good, "--topology-key", "zone with spaces"},
			want: []string{`--topology-key "zone with spaces" is not a label key`},
		},
		"shared flag": {
			args: []string{"--cloud-config", good, "--worker-threads", "0"},
			want: []string{"--worker-threads must be at least 1"},
		},
		"positional argument": {
			args: []string{"extra"},
			want: []string{"unknown command"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := execute(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("CLOUD_CONFIG", writeConfig(t, "[Global]\ncinder-endpoint=http://c/v3\ntenant-id=1\n"))
	t.Setenv("INITIATOR_NAME", "bad-initiator")
	err := execute(t)
	if err == nil || !strings.Contains(err.Error(), `--initiator-name "bad-initiator"`) {
		t.Errorf("err = %v", err)
	}
}

func TestCloudConfigFromOSEnvironment(t *testing.T) {
	t.Setenv("OS_CINDER_ENDPOINT", "http://cinder-host:8776/v3")
	t.Setenv("OS_USERNAME", "admin")
	o := NewOptions()
	if err := o.Complete(); err == nil || !strings.Contains(err.Error(), "noauth needs OS_TENANT_ID") {
		t.Errorf("err = %v", err)
	}
	t.Setenv("OS_TENANT_NAME", "0123abcd")
	o = NewOptions()
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if o.cloud.CinderEndpoint != "http://cinder-host:8776/v3" || o.cloud.TenantName != "0123abcd" {
		t.Errorf("cloud = %+v", o.cloud)
	}
}

func TestOriginalFlagNames(t *testing.T) {
	conf := writeConfig(t, "[Global]\ncinder-endpoint=http://c/v3\ntenant-id=1\n")
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--cloudconfig", conf, "--id", "8c7b1c4e-old-identity"}); err != nil {
		t.Fatal(err)
	}
	if o.CloudConfig != conf || o.Identity != "8c7b1c4e-old-identity" {
		t.Errorf("options = %+v", o)
	}
}

func TestTopologyKeyCanBeEmpty(t *testing.T) {
	o := NewOptions()
	if o.TopologyKey != "" {
		t.Errorf("default --topology-key = %q, want off", o.TopologyKey)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--topology-key=topology.kubernetes.io/zone"}); err != nil {
		t.Fatal(err)
	}
	if o.TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("--topology-key=topology.kubernetes.io/zone gives %q", o.TopologyKey)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
