// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/nfs/pkg/subdir"
)

// parse does what the command does before running: flags, then the
// environment, then Validate.
func parse(t *testing.T, args []string, env map[string]string) (*Options, error) {
	t.Helper()
	for _, k := range []string{"PROVISIONER", "PROVISIONER_NAME", "NFS_SERVER", "NFS_PATH", "MODE",
		"LEADER_ELECTION", "ENABLE_LEADER_ELECTION", "SHARE", "STRICT_PARAMETERS", "NFS_ROOT",
		"NFS_DEFAULT_MODE", "NFS_DEFAULT_UID", "NFS_DEFAULT_GID", "RUN_SERVER", "LEADER_ELECT", "DEVICE_BASED_FSIDS"} {
		// t.Setenv restores the variable after the test; unset it unless given.
		t.Setenv(k, env[k])
		if _, given := env[k]; !given {
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := cli.ApplyEnv(fs); err != nil {
		return nil, err
	}
	if err := o.Complete(); err != nil {
		return nil, err
	}
	return o, o.Validate()
}

func TestProvisionerName(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"default", nil, nil, DefaultProvisioner},
		{"former variable", nil, map[string]string{"PROVISIONER_NAME": "cluster.local/nfs-subdir"}, "cluster.local/nfs-subdir"},
		{"PROVISIONER wins", nil, map[string]string{"PROVISIONER_NAME": "old", "PROVISIONER": "new"}, "new"},
		{"flag wins", []string{"--provisioner=flag"}, map[string]string{"PROVISIONER_NAME": "old"}, "flag"},
	} {
		o, err := parse(t, c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if o.Provisioner != c.want {
			t.Errorf("%s: provisioner %q, want %q", c.name, o.Provisioner, c.want)
		}
	}
}

func TestSubdirFromEnvironment(t *testing.T) {
	o, err := parse(t, []string{"--mode=subdir"}, map[string]string{"NFS_SERVER": "nfs.example", "NFS_PATH": "/share"})
	if err != nil {
		t.Fatal(err)
	}
	if o.NFSServer != "nfs.example" || o.NFSPath != "/share" || o.NFSRoot != DefaultNFSRoot {
		t.Errorf("options %+v", o)
	}
	if _, err := parse(t, []string{"--mode=subdir"}, nil); err == nil || !strings.Contains(err.Error(), "NFS_SERVER") {
		t.Errorf("subdir without server: %v", err)
	}
	if _, err := parse(t, []string{"--mode=subdir", "--run-server", "--nfs-server=x", "--nfs-path=/p"}, nil); err == nil || !strings.Contains(err.Error(), "--run-server") {
		t.Errorf("subdir with --run-server: %v", err)
	}
}

// TestUpstreamEnvironment: the Deployment of nfs-subdir-external-provisioner
// configures it with NFS_SERVER, NFS_PATH, PROVISIONER_NAME and
// ENABLE_LEADER_ELECTION; each is read, and an explicit flag (or our own
// variable) wins over it.
func TestUpstreamEnvironment(t *testing.T) {
	upstream := map[string]string{"NFS_SERVER": "nfs.example", "NFS_PATH": "/var/nfs",
		"PROVISIONER_NAME": "k8s-sigs.io/nfs-subdir-external-provisioner", "ENABLE_LEADER_ELECTION": "true"}
	o, err := parse(t, []string{"--mode=subdir"}, upstream)
	if err != nil {
		t.Fatal(err)
	}
	if o.NFSServer != "nfs.example" || o.NFSPath != "/var/nfs" || o.Provisioner != "k8s-sigs.io/nfs-subdir-external-provisioner" || !o.LeaderElection ||
		o.NFSRoot != "/persistentvolumes" {
		t.Errorf("from the upstream environment: server %q path %q provisioner %q leader election %v",
			o.NFSServer, o.NFSPath, o.Provisioner, o.LeaderElection)
	}
	o, err = parse(t, []string{"--mode=subdir", "--nfs-server=flag.example", "--nfs-path=/flag", "--provisioner=flag/name", "--leader-election=false"}, upstream)
	if err != nil {
		t.Fatal(err)
	}
	if o.NFSServer != "flag.example" || o.NFSPath != "/flag" || o.Provisioner != "flag/name" || o.LeaderElection {
		t.Errorf("flags must win: server %q path %q provisioner %q leader election %v", o.NFSServer, o.NFSPath, o.Provisioner, o.LeaderElection)
	}
	env := map[string]string{"NFS_SERVER": "s", "NFS_PATH": "/p", "ENABLE_LEADER_ELECTION": "false", "LEADER_ELECTION": "true"}
	if o, err = parse(t, []string{"--mode=subdir"}, env); err != nil || !o.LeaderElection {
		t.Errorf("LEADER_ELECTION must win over ENABLE_LEADER_ELECTION: %v, %v", o, err)
	}
	env = map[string]string{"NFS_SERVER": "s", "NFS_PATH": "/p", "ENABLE_LEADER_ELECTION": "sometimes"}
	if _, err = parse(t, []string{"--mode=subdir"}, env); err == nil || !strings.Contains(err.Error(), "ENABLE_LEADER_ELECTION") {
		t.Errorf("bad ENABLE_LEADER_ELECTION: %v; want an error naming it", err)
	}
	if o, err = parse(t, []string{"--mode=subdir", "--nfs-server=s", "--nfs-path=/p"}, nil); err != nil || o.LeaderElection {
		t.Errorf("without ENABLE_LEADER_ELECTION: leader election %v (%v), want the --leader-election default false", o.LeaderElection, err)
	}
}

func TestShares(t *testing.T) {
	o, err := parse(t, []string{"--mode=subdir",
		"--share=name=fast,server=nfs1,path=/fast,root=/mnt/fast",
		"--share=name=slow,server=nfs2,path=/slow,root=/mnt/slow"}, nil)
	if err != nil {
		t.Fatalf("named shares without a default: %v", err)
	}
	cfg, err := o.SubdirConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server != "" || len(cfg.Shares) != 2 || cfg.Shares[1] != (subdir.Share{Name: "slow", Server: "nfs2", Path: "/slow", Root: "/mnt/slow"}) {
		t.Errorf("config %+v", cfg)
	}
	// One variable, several shares; beside the default share.
	o, err = parse(t, []string{"--mode=subdir", "--strict-parameters"}, map[string]string{"NFS_SERVER": "nfs0", "NFS_PATH": "/d",
		"SHARE": "name=a,server=nfs1,path=/a,root=/mnt/a; name=b,server=nfs1,path=/b,root=/mnt/b"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ = o.SubdirConfig(); cfg.Server != "nfs0" || cfg.Root != DefaultNFSRoot || len(cfg.Shares) != 2 || !cfg.Strict {
		t.Errorf("config %+v", cfg)
	}
	for value, want := range map[string]string{
		"name=a,server=s,path=/p":                           "missing root",
		"name=a,server=s,path=/p,root=/r,mode=fast":         `unknown key "mode"`,
		"name=a,name=b,server=s,path=/p,root=/r":            "name given twice",
		"name=a,fast,server=s,path=/p,root=/r":              `"fast" is not key=value`,
		"name=A,server=s,path=/p,root=/r":                   "must be a DNS label",
		"name=a,server=s,path=/p,root=/persistentvolumes/a": "mounted one inside the other",
	} {
		args := []string{"--mode=subdir", "--nfs-server=s0", "--nfs-path=/d", "--share=" + value}
		if _, err := parse(t, args, nil); err == nil || !strings.Contains(err.Error(), "--share") || !strings.Contains(err.Error(), want) {
			t.Errorf("--share=%s: %v; want an error naming --share and containing %q", value, err, want)
		}
	}
	if _, err := parse(t, []string{"--mode=subdir"}, nil); err == nil || !strings.Contains(err.Error(), "--nfs-server (NFS_SERVER) is required") {
		t.Errorf("no share at all: %v", err)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	for args, want := range map[string]string{
		"--mode=client":             "--mode",
		"--export-root=relative":    "--export-root",
		"--export-root=/ex port":    "--export-root",
		"--ganesha-config=rel.conf": "--ganesha-config",
		"--grace-period=-1":         "--grace-period",
		"--export-subnet=":          "--export-subnet",
		"--export-subnet=*; }":      "--export-subnet",
	} {
		_, err := parse(t, []string{args}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error naming %s", args, err, want)
		}
	}
}

func TestServerAddress(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "storage", Name: "nfs"},
		// Only NFSv4's port: enough, with a warning, not an error.
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "nfs", Port: 2049}}},
	}
	headless := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "storage", Name: "headless"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
	}
	kube := fake.NewClientset(svc, headless)
	t.Setenv("POD_NAMESPACE", "storage")
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{ServerHostname: "nfs.example", ServiceName: "nfs", PodIP: "10.0.0.5"}, "nfs.example"},
		{Options{ServiceName: "nfs", PodIP: "10.0.0.5"}, "10.96.0.10"},
		{Options{PodIP: "10.0.0.5", NodeName: "node-1"}, "10.0.0.5"},
		{Options{NodeName: "node-1"}, "node-1"},
		{Options{ServiceName: "headless"}, "error"},
		{Options{ServiceName: "missing"}, "error"},
		{Options{}, "error"},
	} {
		got, err := c.o.serverAddress(ctx, kube)
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("serverAddress(%+v) = %q (%v), want %q", c.o, got, err, c.want)
		}
	}
}

// TestUpstreamOwnershipEnvironment: nfs-subdir-external-provisioner's
// NFS_DEFAULT_MODE, NFS_DEFAULT_UID and NFS_DEFAULT_GID become the
// directories' defaults; a bad value stops the start naming the variable,
// and server mode refuses them (its directories follow the class's gid).
func TestUpstreamOwnershipEnvironment(t *testing.T) {
	env := map[string]string{"NFS_SERVER": "nfs.example", "NFS_PATH": "/share",
		"NFS_DEFAULT_MODE": "0750", "NFS_DEFAULT_UID": "1000", "NFS_DEFAULT_GID": "2000"}
	o, err := parse(t, []string{"--mode=subdir"}, env)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.SubdirConfig()
	if err != nil {
		t.Fatal(err)
	}
	if own := cfg.Ownership; own.Mode == nil || *own.Mode != 0o750 || own.UID == nil || *own.UID != 1000 || own.GID == nil || *own.GID != 2000 {
		t.Errorf("ownership %+v, want 0750 1000:2000", own)
	}
	for k, bad := range map[string]string{"NFS_DEFAULT_MODE": "0999", "NFS_DEFAULT_UID": "nobody", "NFS_DEFAULT_GID": "-1"} {
		e := map[string]string{"NFS_SERVER": "nfs.example", "NFS_PATH": "/share", k: bad}
		if _, err := parse(t, []string{"--mode=subdir"}, e); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v; want an error naming %s", k, bad, err, k)
		}
	}
	if _, err := parse(t, nil, map[string]string{"NFS_DEFAULT_MODE": "0750"}); err == nil || !strings.Contains(err.Error(), "gid") {
		t.Errorf("server mode with NFS_DEFAULT_MODE: %v; want an error pointing to the class's gid", err)
	}
}

// TestClassicProvisionerFlags: the classic nfs-provisioner's manifests
// (deploy/kubernetes: "-provisioner=example.com/nfs", "-grace-period=0")
// and its other flags, spelled with one dash as Go's flag package allows,
// mean what they meant there: -run-server is on unless turned off,
// -leader-elect is --leader-election, -device-based-fsids is kept for
// Ganesha. Subdir mode refuses the server-only ones.
func TestClassicProvisionerFlags(t *testing.T) {
	classic := func(args ...string) (*Options, error) {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		NewOptions().AddFlags(fs)
		return parse(t, cli.LongFlagsWithOneDash(fs, args), nil)
	}
	o, err := classic("-provisioner=example.com/nfs", "-grace-period=0")
	if err != nil {
		t.Fatal(err)
	}
	if o.Provisioner != "example.com/nfs" || o.GracePeriod != 0 || !o.RunServer || o.LeaderElection {
		t.Errorf("classic manifest: provisioner %q grace %d run-server %t leader-election %t; want example.com/nfs 0 true false",
			o.Provisioner, o.GracePeriod, o.RunServer, o.LeaderElection)
	}
	if o, err = classic("-run-server=false", "-leader-elect=true", "-device-based-fsids=false"); err != nil {
		t.Fatal(err)
	}
	if o.RunServer || !o.LeaderElection || o.DeviceBasedFsids || !o.given("device-based-fsids") {
		t.Errorf("run-server %t leader-election %t device-based-fsids %t (given %t); want false true false true",
			o.RunServer, o.LeaderElection, o.DeviceBasedFsids, o.given("device-based-fsids"))
	}
	if o, err = classic("-leader-elect"); err != nil || !o.LeaderElection {
		t.Errorf("-leader-elect alone: %v, leader-election %t", err, o != nil && o.LeaderElection)
	}
	// Subdir mode: the default -run-server is no error; given, it is.
	if _, err := classic("--mode=subdir", "--nfs-server=x", "--nfs-path=/p"); err != nil {
		t.Errorf("subdir mode with the default --run-server: %v", err)
	}
	if _, err := classic("--mode=subdir", "--nfs-server=x", "--nfs-path=/p", "-device-based-fsids=true"); err == nil || !strings.Contains(err.Error(), "--device-based-fsids") {
		t.Errorf("subdir mode with -device-based-fsids: %v", err)
	}
}
