// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csidriver

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// AddFlags binds the command-line flags of test/cmd/csidriver to o, with
// o's values as defaults; Args writes o back as those flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Name, "name", o.Name, "driver name GetPluginInfo returns")
	fs.Var((*capabilities)(&o.ControllerCapabilities), "controller-capabilities",
		"comma-separated controller capabilities without their prefix, such as CREATE_DELETE_VOLUME,CLONE_VOLUME (default CREATE_DELETE_VOLUME,CLONE_VOLUME,GET_CAPACITY)")
	fs.BoolVar(&o.NoControllerService, "no-controller-service", o.NoControllerService, "drop the CONTROLLER_SERVICE plugin capability")
	fs.BoolVar(&o.Topology, "topology", o.Topology, "add the VOLUME_ACCESSIBILITY_CONSTRAINTS plugin capability")
	fs.Int64Var(&o.MaxVolumeSize, "max-volume-size", o.MaxVolumeSize, "largest volume in bytes, also reported by GetCapacity (0: 1 TiB, not reported)")
	fs.StringVar(&o.StateDir, "statedir", o.StateDir, "directory for the state file and a directory per volume, kept across restarts (empty: volumes in memory)")
	fs.StringVar(&o.RequestLog, "request-log", o.RequestLog, "file every CreateVolume, DeleteVolume and GetCapacity request is appended to, secrets included (tests only)")
	fs.DurationVar(&o.OperationDelay, "operation-delay", o.OperationDelay, "time each CreateVolume and DeleteVolume takes between its two steps on disk")
}

// Args are the flags of test/cmd/csidriver that give a driver o (but
// Logf, which the command sets).
func (o Options) Args() []string {
	args := []string{"--name=" + o.Name}
	if o.ControllerCapabilities != nil {
		args = append(args, "--controller-capabilities="+(*capabilities)(&o.ControllerCapabilities).String())
	}
	if o.NoControllerService {
		args = append(args, "--no-controller-service")
	}
	if o.Topology {
		args = append(args, "--topology")
	}
	if o.MaxVolumeSize != 0 {
		args = append(args, "--max-volume-size="+strconv.FormatInt(o.MaxVolumeSize, 10))
	}
	if o.StateDir != "" {
		args = append(args, "--statedir="+o.StateDir)
	}
	if o.RequestLog != "" {
		args = append(args, "--request-log="+o.RequestLog)
	}
	if o.OperationDelay != 0 {
		args = append(args, "--operation-delay="+o.OperationDelay.String())
	}
	return args
}

// capabilities is the flag.Value of Options.ControllerCapabilities.
type capabilities []csi.ControllerServiceCapability_RPC_Type

func (c *capabilities) String() string {
	if c == nil {
		return ""
	}
	names := make([]string, len(*c))
	for i, t := range *c {
		names[i] = t.String()
	}
	return strings.Join(names, ",")
}

func (c *capabilities) Set(s string) error {
	*c = capabilities{} // given, even empty: not the defaults
	for name := range strings.SplitSeq(s, ",") {
		if name == "" {
			continue
		}
		t, ok := csi.ControllerServiceCapability_RPC_Type_value[name]
		if !ok {
			return fmt.Errorf("unknown controller capability %q", name)
		}
		*c = append(*c, csi.ControllerServiceCapability_RPC_Type(t))
	}
	return nil
}
