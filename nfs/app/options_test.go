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
)

// parse does what the command does before running: flags, then the
// environment, then Validate.
func parse(t *testing.T, args []string, env map[string]string) (*Options, error) {
	t.Helper()
	for _, k := range []string{"PROVISIONER", "PROVISIONER_NAME", "NFS_SERVER", "NFS_PATH", "MODE"} {
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
