// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubeprov/external-storage/lib/cli"
)

// upstreamFlags are the flags of kubernetes-csi/external-provisioner v6.3
// with their defaults (read from its cmd/csi-provisioner and csi-lib-utils'
// standardflags), written as pflag prints them. Two
// print differently upstream for the same default: --leader-election-labels
// ("map[]": no labels) and --feature-gates (none given).
var upstreamFlags = map[string]string{
	"automaxprocs":                      "false",
	"capacity-for-immediate-binding":    "false",
	"capacity-ownerref-level":           "1",
	"capacity-poll-interval":            "1m0s",
	"capacity-threads":                  "1",
	"cloning-protection-threads":        "1",
	"controller-publish-readonly":       "false",
	"csi-address":                       "/run/csi/socket",
	"default-fstype":                    "",
	"enable-capacity":                   "false",
	"enable-pprof":                      "false",
	"extra-create-metadata":             "false",
	"feature-gates":                     "",
	"http-endpoint":                     "",
	"immediate-topology":                "true",
	"kube-api-burst":                    "10",
	"kube-api-capacity-burst":           "5",
	"kube-api-capacity-qps":             "1",
	"kube-api-qps":                      "5",
	"kubeconfig":                        "",
	"leader-election":                   "false",
	"leader-election-labels":            "",
	"leader-election-lease-duration":    "15s",
	"leader-election-namespace":         "",
	"leader-election-renew-deadline":    "10s",
	"leader-election-retry-period":      "5s",
	"log-flush-frequency":               "5s",
	"log-json-info-buffer-size":         "0",
	"log-json-split-stream":             "false",
	"log-text-info-buffer-size":         "0",
	"log-text-split-stream":             "false",
	"logging-format":                    "text",
	"master":                            "",
	"metrics-address":                   "",
	"metrics-path":                      "/metrics",
	"node-deployment":                   "false",
	"node-deployment-base-delay":        "20s",
	"node-deployment-immediate-binding": "true",
	"node-deployment-max-delay":         "1m0s",
	"prevent-volume-mode-conversion":    "true",
	"retry-interval-max":                "5m0s",
	"retry-interval-start":              "1s",
	"snapshot-orphan-sweep-interval":    "5m0s",
	"strict-topology":                   "false",
	"timeout":                           "10s",
	"v":                                 "0",
	"version":                           "false",
	"vmodule":                           "",
	"volume-name-prefix":                "pvc",
	"volume-name-uuid-length":           "-1",
	"worker-threads":                    "100",
}

// ownFlags are csi-provisioner's flags that external-provisioner does not have.
var ownFlags = []string{"forward-pvc-annotations", "forward-pvc-labels", "help"}

// TestUpstreamFlags: every flag of the upstream sidecar exists with its
// default, so that its Deployment's arguments work unchanged; any other
// flag is one of ours, listed above (and in the README).
func TestUpstreamFlags(t *testing.T) {
	cmd := NewCommand()
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	fs := cmd.Flags()
	for name, def := range upstreamFlags {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no flag --%s", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s defaults to %q, upstream to %q", name, f.DefValue, def)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := upstreamFlags[f.Name]; !ok && !slices.Contains(ownFlags, f.Name) {
			t.Errorf("--%s is neither upstream's nor listed as our own", f.Name)
		}
	})
	if f := fs.Lookup("v"); f.Shorthand != "v" {
		t.Errorf("-v is not a shorthand: -v=5 would not parse")
	}
}

// TestUpstreamArguments: an upstream Deployment's arguments parse and mean
// what they mean upstream; those without effect here are reported once.
func TestUpstreamArguments(t *testing.T) {
	o := NewOptions()
	cmd := cli.NewCommand(BinaryName, "", o)
	args := []string{
		"--csi-address=/csi/csi.sock", "--v=5", "-v=5", "--feature-gates=Topology=true,CrossNamespaceVolumeDataSource=true",
		"--leader-election", "--leader-election-namespace=kube-system", "--leader-election-labels=a:b,example.com/c:d",
		"--timeout=60s", "--extra-create-metadata", "--http-endpoint=:8080", "--enable-capacity=false",
		"--capacity-ownerref-level=0", "--default-fstype=ext4", "--automaxprocs", "--logging-format=json",
		"--controller-publish-readonly", "--prevent-volume-mode-conversion=false", "--cloning-protection-threads=2",
		"--snapshot-orphan-sweep-interval=1m", "--enable-pprof", "--master=https://127.0.0.1:6443",
	}
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.CSIAddress != "/csi/csi.sock" || o.Timeout != time.Minute || !o.ExtraCreateMetadata || o.DefaultFSType != "ext4" ||
		!o.LeaderElection || o.LeaderElectionNamespace != "kube-system" || o.HTTPEndpoint != ":8080" || !o.EnablePprof ||
		o.Master != "https://127.0.0.1:6443" || !o.ControllerPublishReadOnly || o.PreventVolumeModeConversion ||
		o.CloningProtectionThreads != 2 || o.Capacity.OwnerrefLevel != 0 || o.SnapshotOrphanSweepInterval != time.Minute {
		t.Errorf("options not as given: %+v", o)
	}
	if want := map[string]string{"a": "b", "example.com/c": "d"}; !maps.Equal(o.LeaseLabels, want) {
		t.Errorf("lease labels %v, want %v", o.LeaseLabels, want)
	}
	if !o.FeatureGates["CrossNamespaceVolumeDataSource"] || !o.FeatureGates["Topology"] {
		t.Errorf("feature gates %v", o.FeatureGates)
	}
	var got []string
	for _, f := range o.ignoredFlags() {
		got = append(got, f.flag)
	}
	want := []string{"--automaxprocs"}
	if !slices.Equal(got, want) {
		t.Errorf("ignored flags %v, want %v", got, want)
	}
}

// TestNothingIgnoredByDefault: without the compatibility flags, no line
// says a flag is ignored.
func TestNothingIgnoredByDefault(t *testing.T) {
	o := NewOptions()
	cmd := cli.NewCommand(BinaryName, "", o)
	if err := cmd.Flags().Parse([]string{"--feature-gates=Topology=true"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if got := o.ignoredFlags(); len(got) != 0 {
		t.Errorf("ignored flags %v, want none", got)
	}
}

// TestFeatureGates: known gates are kept for later reading, unknown ones
// and the locked one are errors naming them.
func TestFeatureGates(t *testing.T) {
	tests := []struct {
		arg     string
		want    map[string]bool
		wantErr string
	}{
		{arg: "", want: map[string]bool{"Topology": true, "HonorPVReclaimPolicy": true, "CrossNamespaceVolumeDataSource": false, "VolumeAttributesClass": true,
			"ReleaseLeaderElectionOnExit": false}},
		// Upstream's alpha gate; the Lease is released on exit either way.
		{arg: "ReleaseLeaderElectionOnExit=true", want: map[string]bool{"ReleaseLeaderElectionOnExit": true}},
		{arg: "Topology=false,CrossNamespaceVolumeDataSource=true", want: map[string]bool{"Topology": false, "CrossNamespaceVolumeDataSource": true}},
		{arg: "Bogus=true", wantErr: "unrecognized feature gate: Bogus"},
		{arg: "HonorPVReclaimPolicy=false", wantErr: "HonorPVReclaimPolicy"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			err := fs.Parse([]string{"--feature-gates=" + tc.arg})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			for gate, want := range tc.want {
				if got, ok := o.FeatureGates[gate]; !ok || got != want {
					t.Errorf("FeatureGates[%s] = %v (known %v), want %v", gate, got, ok, want)
				}
			}
		})
	}
}

// TestMetricsAddressAndHTTPEndpointExclusive: as upstream, only one of the
// two names of the endpoint may be given.
func TestMetricsAddressAndHTTPEndpointExclusive(t *testing.T) {
	cmd := NewCommand()
	cmd.SetArgs([]string{"--metrics-address=:8080", "--http-endpoint=:8081"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "only one of --metrics-address and --http-endpoint can be set") {
		t.Fatalf("error %v, want the two endpoints refused", err)
	}
}
