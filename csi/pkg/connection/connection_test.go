// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package connection

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2/ktesting"
)

func TestTarget(t *testing.T) {
	tests := []struct{ in, want, wantErr string }{
		{in: "/run/csi/socket", want: "unix:///run/csi/socket"},
		{in: "unix:///run/csi/socket", want: "unix:///run/csi/socket"},
		{in: "unix:relative.sock", want: "unix:relative.sock"},
		{in: "relative.sock", want: "unix:relative.sock"},
		{in: "tcp://127.0.0.1:10000", wantErr: "only unix sockets"},
		{in: "", wantErr: "empty"},
	}
	for _, tc := range tests {
		got, err := Target(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// plugin is the smallest identity and controller service for these tests.
type plugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	ready    bool
	topology bool
	rpcs     []csi.ControllerServiceCapability_RPC_Type
}

func (p *plugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "test.example.com", VendorVersion: "1.0"}, nil
}

func (p *plugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	types := []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE}
	if p.topology {
		types = append(types, csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	var caps []*csi.PluginCapability
	for _, t := range types {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}})
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (p *plugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(p.ready)}, nil
}

func (p *plugin) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range p.rpcs {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func serve(t *testing.T, path string, p *plugin) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, p)
	csi.RegisterControllerServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
}

func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "csi") // t.TempDir can exceed the 108-byte socket path limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

// TestWaitsForTheSocket: the provisioner may start before its driver.
func TestWaitsForTheSocket(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	path := socketPath(t)
	conn, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	done := make(chan error, 1)
	go func() { done <- WaitForConnection(ctx, conn) }()
	p := &plugin{ready: true, topology: true, rpcs: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER, csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	}}
	serve(t, path, p)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := WaitForDriver(ctx, conn, time.Second); err != nil {
		t.Fatal(err)
	}
	info, err := GetDriverInfo(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	want := DriverInfo{Name: "test.example.com", VendorVersion: "1.0", Capabilities: Capabilities{
		ControllerService: true, Topology: true, CreateDeleteVolume: true, CloneVolume: true, SingleNodeMultiWriter: true, GetCapacity: true,
	}}
	if info != want {
		t.Errorf("driver info %+v, want %+v", info, want)
	}
}

func TestProbeNotReady(t *testing.T) {
	path := socketPath(t)
	serve(t, path, &plugin{ready: false})
	conn, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := Probe(t.Context(), conn); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("error %v, want not ready", err)
	}
	info, err := GetDriverInfo(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if info.Capabilities.CreateDeleteVolume {
		t.Errorf("CreateDeleteVolume reported without the capability")
	}
}

// TestWaitGivesUp: the wait ends with the context, saying what it waited for.
func TestWaitGivesUp(t *testing.T) {
	conn, err := Dial(socketPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := WaitForConnection(ctx, conn); err == nil || !strings.Contains(err.Error(), "connecting to the CSI driver") {
		t.Errorf("error %v", err)
	}
}
