// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	driver := filepath.Join(dir, "driver")
	if err := os.WriteFile(driver, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		set     func(*Options)
		wantErr []string
	}{
		{name: "exec", set: func(o *Options) { o.Driver = driver }},
		{name: "container", set: func(o *Options) { o.Launcher = LauncherContainer }},
		{name: "exec without driver", set: func(*Options) {}, wantErr: []string{"--driver is required with --launcher=exec"}},
		{name: "driver missing", set: func(o *Options) { o.Driver = filepath.Join(dir, "nope") }, wantErr: []string{"--driver: stat"}},
		{name: "driver not executable", set: func(o *Options) { o.Driver = plain }, wantErr: []string{"is not an executable file"}},
		{name: "driver is a directory", set: func(o *Options) { o.Driver = dir }, wantErr: []string{"is not an executable file"}},
		{name: "unknown launcher", set: func(o *Options) { o.Launcher = "docker" }, wantErr: []string{`--launcher must be exec or container, got "docker"`}},
		{name: "driver with container", set: func(o *Options) { o.Launcher, o.Driver = LauncherContainer, driver }, wantErr: []string{"--driver is for --launcher=exec"}},
		{name: "allowed config namespaces", set: func(o *Options) { o.Launcher, o.AllowConfigNamespaces = LauncherContainer, []string{"storage-admin"} }},
		{name: "bad config namespace", set: func(o *Options) { o.Launcher, o.AllowConfigNamespaces = LauncherContainer, []string{"Bad_NS"} }, wantErr: []string{`--allow-config-namespaces: "Bad_NS" is not a namespace name`}},
		{name: "bad timeouts", set: func(o *Options) {
			o.Driver, o.DriverTimeout, o.Timeout = driver, 5*time.Minute, time.Minute
		}, wantErr: []string{"--timeout (1m0s) must be 0 or more than --driver-timeout (5m0s)"}},
		{name: "no timeout bound", set: func(o *Options) { o.Driver, o.DriverTimeout, o.Timeout = driver, 5*time.Minute, 0 }},
		{name: "several at once", set: func(o *Options) {
			o.Launcher, o.Provisioner, o.DriverTimeout, o.PodStartTimeout, o.WorkerThreads = LauncherContainer, "", 0, 0, 0
		}, wantErr: []string{"--provisioner must not be empty", "--driver-timeout must be more than 0", "--pod-start-timeout", "--worker-threads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.set(o)
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want %q", err, w)
				}
			}
		})
	}
}

func TestIdentityDefault(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "storage")
	for _, tc := range []struct {
		name                        string
		set                         func(*Options)
		wantNamespace, wantIdentity string
	}{
		{"defaults", func(*Options) {}, "storage", "kubeprov.io/flex/storage"},
		{"--config-namespace", func(o *Options) { o.ConfigNamespace = "other" }, "other", "kubeprov.io/flex/other"},
		{"--identity", func(o *Options) { o.Identity = "site-a" }, "storage", "site-a"},
	} {
		o := NewOptions()
		tc.set(o)
		if err := o.Complete(); err != nil {
			t.Fatal(err)
		}
		if o.ConfigNamespace != tc.wantNamespace || o.Identity != tc.wantIdentity {
			t.Errorf("%s: namespace %q, identity %q; want %q, %q", tc.name, o.ConfigNamespace, o.Identity, tc.wantNamespace, tc.wantIdentity)
		}
	}
}

// Every flag can come from the environment, and bad values are refused
// before anything starts.
func TestCommandFlagsAndEnvironment(t *testing.T) {
	t.Setenv("LAUNCHER", "container")
	t.Setenv("DRIVER_TIMEOUT", "forever")
	cmd := NewCommand()
	cmd.SetArgs([]string{"--provisioner=example.com/x"})
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "DRIVER_TIMEOUT (--driver-timeout)") {
		t.Errorf("err = %v", err)
	}
	if f := cmd.Flags().Lookup("launcher"); f.Value.String() != "container" {
		t.Errorf("LAUNCHER did not set --launcher: %s", f.Value)
	}
	if cmd.Flags().Lookup("kubeconfig") == nil || cmd.Flags().Lookup("leader-election") == nil {
		t.Error("the shared flag family is missing")
	}
}
