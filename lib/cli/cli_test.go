// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) (*Common, error) {
	t.Helper()
	o := NewCommon("example.com/test")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &o, o.Validate()
}

// TestLeaderElectionLabels: the sidecars' key:value syntax, repeatable.
func TestLeaderElectionLabels(t *testing.T) {
	o, err := parse(t, "--leader-election-labels=a:b,example.com/c:d", "--leader-election-labels=e:")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "b", "example.com/c": "d", "e": ""}; !maps.Equal(o.LeaseLabels, want) {
		t.Errorf("labels %v, want %v", o.LeaseLabels, want)
	}
	for arg, wantErr := range map[string]string{
		"--leader-election-labels=a=b":       `malformed label "a=b": want key:value`,
		"--leader-election-labels=a:b:c":     `malformed label "a:b:c"`,
		"--leader-election-labels=bad key:v": `--leader-election-labels: key "bad key"`,
	} {
		if _, err := parse(t, arg); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want one containing %q", arg, err, wantErr)
		}
	}
}

// TestEndpointFlags: --metrics-address is --http-endpoint's old name, never
// both; profiles need an endpoint to be served on.
func TestEndpointFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--metrics-address=:8080"}},
		{args: []string{"--http-endpoint=:8080", "--enable-pprof"}},
		{args: []string{"--metrics-address=:8080", "--http-endpoint=:8081"}, wantErr: "only one of --metrics-address and --http-endpoint can be set"},
		{args: []string{"--metrics-address=8080"}, wantErr: "--metrics-address: address 8080: missing port"},
		{args: []string{"--enable-pprof"}, wantErr: "--enable-pprof needs --http-endpoint"},
	} {
		_, err := parse(t, tc.args...)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantErr)
		}
	}
}

// recordingOptions is a binary's options that records what Run was given.
type recordingOptions struct {
	Common
	ran bool
}

func (o *recordingOptions) Run(context.Context) error { o.ran = true; return nil }

// TestLongFlagsWithOneDash: manifests written for the CSI sidecars and the
// classic provisioners (Go's flag package) spell long flags with one dash;
// they mean the same here, while -v and a value after its flag stay as given.
func TestLongFlagsWithOneDash(t *testing.T) {
	o := &recordingOptions{Common: NewCommon("example.com/default")}
	cmd := NewCommand("test-provisioner", "", o)
	cmd.SetArgs([]string{"-provisioner=example.com/dir", "-kube-api-qps", "7", "-leader-election", "-v=3",
		"-http-endpoint=127.0.0.1:0", "--metrics-path", "-not-a-flag-but-a-value"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	// The value of --metrics-path was taken as given (not rewritten), and
	// is then refused for not starting with /.
	if err == nil || !strings.Contains(err.Error(), "--metrics-path must start with /") {
		t.Fatalf("error %v, want only --metrics-path refused; output:\n%s", err, &out)
	}
	if o.Provisioner != "example.com/dir" || o.KubeAPIQPS != 7 || !o.LeaderElection || o.HTTPEndpoint != "127.0.0.1:0" ||
		o.MetricsPath != "-not-a-flag-but-a-value" {
		t.Errorf("options not as given: %+v", o.Common)
	}
	if v := cmd.Flags().Lookup("v"); v.Value.String() != "3" {
		t.Errorf("-v=3 gave -v %s", v.Value)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-no-such-flag=1"}, "unknown shorthand flag: 'n' in -no-such-flag=1"},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		cmd := NewCommand("test-provisioner", "", &recordingOptions{Common: NewCommon("example.com/default")})
		cmd.SetArgs(tc.args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}

	// --help and -version still answer without running.
	for _, arg := range []string{"-help", "-version", "--version", "-h"} {
		o := &recordingOptions{Common: NewCommon("example.com/default")}
		cmd := NewCommand("test-provisioner", "", o)
		out.Reset()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{arg})
		if err := cmd.Execute(); err != nil || o.ran || out.Len() == 0 {
			t.Errorf("%s: error %v, ran %v, output %q", arg, err, o.ran, &out)
		}
	}
}
