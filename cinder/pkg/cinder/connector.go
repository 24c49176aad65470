// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"encoding/json"
	"runtime"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
)

// Connector describes, to Cinder, the "host" that will use the volumes: the
// cluster's nodes, all logging in with the same iSCSI initiator name (it is
// written on every iSCSI PV, so the kubelet uses it instead of the node's
// own). Backends grant access to it in os-initialize_connection and revoke
// it in os-terminate_connection.
type Connector struct {
	// Initiator is the iSCSI initiator IQN; required for iSCSI backends.
	Initiator string `json:"initiator,omitempty"`
	// Host names the attaching host in Cinder's records.
	Host string `json:"host,omitempty"`
	// IP is the address some backends export to; optional.
	IP string `json:"ip,omitempty"`
	// WWPNs are the nodes' Fibre Channel port names, for backends that zone
	// or mask by WWPN; optional.
	WWPNs []string `json:"wwpns,omitempty"`
	// Platform and OSType are what os-brick sends (x86_64, linux2).
	Platform string `json:"platform,omitempty"`
	OSType   string `json:"os_type,omitempty"`
}

// DefaultOSType is what os-brick reports for Linux hosts.
const DefaultOSType = "linux2"

// DefaultPlatform is the platform os-brick would report for this binary's
// architecture.
func DefaultPlatform() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	default:
		return runtime.GOARCH
	}
}

// The connector always says multipath false: a Kubernetes iSCSI volume
// takes its extra portals from the answer, and the kubelet decides about
// multipath itself.

func (c Connector) initializeOpts() volumes.InitializeConnectionOpts {
	multipath := false
	return volumes.InitializeConnectionOpts{
		IP: c.IP, Host: c.Host, Initiator: c.Initiator, Wwpns: c.WWPNs,
		Multipath: &multipath, Platform: c.Platform, OSType: c.OSType,
	}
}

func (c Connector) terminateOpts() volumes.TerminateConnectionOpts {
	multipath := false
	return volumes.TerminateConnectionOpts{
		IP: c.IP, Host: c.Host, Initiator: c.Initiator, Wwpns: c.WWPNs,
		Multipath: &multipath, Platform: c.Platform, OSType: c.OSType,
	}
}

// encode is the connector as stored on the PV, so that Delete terminates the
// connection that was made even if the flags have changed since.
func (c Connector) encode() string {
	b, _ := json.Marshal(c) // a struct of strings always marshals
	return string(b)
}

func decodeConnector(s string) (Connector, error) {
	var c Connector
	err := json.Unmarshal([]byte(s), &c)
	return c, err
}
