// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// TestFlagDefaults: the defaults CSI sidecar users know.
func TestFlagDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	want := map[string]string{
		"csi-address": "/run/csi/socket", "timeout": "10s", "worker-threads": "100",
		"retry-interval-start": "1s", "retry-interval-max": "5m0s", "kube-api-qps": "5", "kube-api-burst": "10",
		"volume-name-prefix": "pvc", "volume-name-uuid-length": "-1", "extra-create-metadata": "false",
		"default-fstype": "", "strict-topology": "false", "immediate-topology": "true",
		"leader-election": "false", "metrics-path": "/metrics", "http-endpoint": "",
		"forward-pvc-labels": "[]", "forward-pvc-annotations": "[]",
	}
	for name, value := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no flag --%s", name)
			continue
		}
		if f.DefValue != value {
			t.Errorf("--%s defaults to %q, want %q", name, f.DefValue, value)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		{args: []string{"--volume-name-prefix=vol", "--volume-name-uuid-length=8", "--forward-pvc-labels=team,example.com/owner"}},
		{args: []string{"--volume-name-prefix=pvc-"}, wantErr: "--volume-name-prefix must not end with '-'"},
		{args: []string{"--volume-name-prefix=Bad_Prefix"}, wantErr: `--volume-name-prefix "Bad_Prefix" does not make valid PV names`},
		{args: []string{"--volume-name-prefix="}, wantErr: "--volume-name-prefix must not be empty"},
		{args: []string{"--volume-name-uuid-length=0"}, wantErr: "--volume-name-uuid-length must be -1"},
		{args: []string{"--volume-name-uuid-length=-2"}, wantErr: "--volume-name-uuid-length must be -1"},
		{args: []string{"--forward-pvc-annotations=ok,not ok"}, wantErr: `--forward-pvc-annotations: "not ok" is not a valid`},
		{args: []string{"--csi-address="}, wantErr: "--csi-address is required"},
		{args: []string{"--worker-threads=0"}, wantErr: "--worker-threads must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			checkValidate(t, tc.args, tc.wantErr)
		})
	}
}

func TestVolumeName(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{}
	claim.UID = "0b9e5c2e-6f4a-4d7e-9a57-2f1c8e0d3b11"
	tests := []struct {
		prefix string
		length int
		want   string
	}{
		{"pvc", -1, "pvc-0b9e5c2e-6f4a-4d7e-9a57-2f1c8e0d3b11"},
		// As upstream: the dashes are removed before the uid is cut.
		{"vol", 8, "vol-0b9e5c2e"},
		{"vol", 12, "vol-0b9e5c2e6f4a"},
		{"vol", 32, "vol-0b9e5c2e6f4a4d7e9a572f1c8e0d3b11"},
		{"vol", 100, "vol-0b9e5c2e6f4a4d7e9a572f1c8e0d3b11"},
	}
	for _, tc := range tests {
		o := NewOptions()
		o.VolumeNamePrefix, o.VolumeNameUUIDLength = tc.prefix, tc.length
		if got := o.VolumeName(claim); got != tc.want {
			t.Errorf("prefix %q length %d: %q, want %q", tc.prefix, tc.length, got, tc.want)
		}
	}
}

// TestCommandRejectsBadEnvironment: flags come from the environment too, and
// are validated before anything connects.
func TestCommandRejectsBadEnvironment(t *testing.T) {
	t.Setenv("VOLUME_NAME_PREFIX", "trailing-")
	cmd := NewCommand()
	cmd.SetArgs([]string{"--csi-address=/nonexistent/socket"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--volume-name-prefix must not end with '-'") {
		t.Fatalf("error %v, want the prefix rejected", err)
	}
}

// TestLongFlagsWithOneDash: manifests written for upstream (Go's flag
// package) may say -csi-address=...; it parses, and the command goes on to
// validate.
func TestLongFlagsWithOneDash(t *testing.T) {
	cmd := NewCommand()
	cmd.SetArgs([]string{"-csi-address=/nonexistent/socket", "-volume-name-prefix=trailing-"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--volume-name-prefix must not end with '-'") {
		t.Fatalf("error %v, want the arguments parsed and the prefix rejected", err)
	}
}

func TestCommandRejectsArguments(t *testing.T) {
	cmd := NewCommand()
	cmd.SetArgs([]string{"extra"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.Execute(); err == nil {
		t.Fatal("positional argument accepted")
	}
}

// TestUpstreamLeaseName: the Lease names the upstream sidecar uses.
func TestUpstreamLeaseName(t *testing.T) {
	for driver, want := range map[string]string{
		"hostpath.csi.k8s.io":        "hostpath-csi-k8s-io",
		"ebs.csi.aws.com":            "ebs-csi-aws-com",
		"example.com/csi-":           "example-com-csi-X",
		"rook-ceph.rbd.csi.ceph.com": "rook-ceph-rbd-csi-ceph-com",
	} {
		if got := UpstreamLeaseName(driver); got != want {
			t.Errorf("UpstreamLeaseName(%q) = %q, want %q", driver, got, want)
		}
	}
}

// checkValidate parses args into new options and checks what Validate
// says: nothing when wantErr is "", else an error containing it.
func checkValidate(t *testing.T, args []string, wantErr string) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("error %v, want one containing %q", err, wantErr)
	}
}
