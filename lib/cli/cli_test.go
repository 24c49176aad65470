// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
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
