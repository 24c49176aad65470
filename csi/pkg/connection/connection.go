// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package connection talks to a CSI driver's controller over its unix
// socket: it waits for the socket, keeps the connection alive across driver
// restarts, and asks the driver who it is and what it can do.
package connection

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

const (
	// reconnectMaxDelay caps the backoff between reconnection attempts: a
	// restarted driver container is back within seconds, and waiting the
	// gRPC default of two minutes would stall provisioning needlessly.
	reconnectMaxDelay = 5 * time.Second
	// waitLogInterval is how often a wait for the driver says it is still waiting.
	waitLogInterval = 10 * time.Second
)

// Target turns a --csi-address value (a path, unix:path or unix:///path)
// into a gRPC target. Only unix sockets are supported: the driver runs in the
// same pod.
func Target(address string) (string, error) {
	switch {
	case address == "":
		return "", errors.New("the CSI address is empty")
	case strings.HasPrefix(address, "unix:"):
		return address, nil
	case strings.Contains(address, "://"):
		return "", fmt.Errorf("CSI address %q: only unix sockets are supported", address)
	case filepath.IsAbs(address):
		return "unix://" + address, nil
	default:
		return "unix:" + address, nil
	}
}

// Dial returns a client connection to the driver's socket. Connecting is
// lazy and, once the driver is reachable, automatic after every loss, with
// backoff capped at reconnectMaxDelay; use WaitForConnection to wait for the
// first one. interceptors (such as Metrics.Interceptor) see every call.
func Dial(address string, interceptors ...grpc.UnaryClientInterceptor) (*grpc.ClientConn, error) {
	target, err := Target(address)
	if err != nil {
		return nil, err
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = reconnectMaxDelay
	return grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: time.Second}),
		grpc.WithChainUnaryInterceptor(append([]grpc.UnaryClientInterceptor{logCalls}, interceptors...)...),
	)
}

// WaitForConnection blocks until conn is connected or ctx ends, logging
// while it waits: at startup the driver container may still be starting.
func WaitForConnection(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		state := conn.GetState()
		switch state {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		}
		waitCtx, cancel := context.WithTimeout(ctx, waitLogInterval)
		changed := conn.WaitForStateChange(waitCtx, state)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("connecting to the CSI driver at %s: %w", conn.Target(), context.Cause(ctx))
		}
		if !changed {
			klog.FromContext(ctx).Info("Still connecting to the CSI driver", "address", conn.Target(), "state", state.String())
		}
	}
}

// logCalls logs each call's method, duration and result code. Requests and
// answers are never logged: they carry secrets.
func logCalls(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	klog.FromContext(ctx).V(4).Info("CSI call", "method", method, "duration", time.Since(start), "code", status.Code(err).String())
	return err
}

// Capabilities are what the driver said it can do.
type Capabilities struct {
	// ControllerService: the plugin has a controller service at all.
	ControllerService bool
	// Topology: volumes are not equally reachable from all nodes
	// (VOLUME_ACCESSIBILITY_CONSTRAINTS).
	Topology bool
	// CreateDeleteVolume: CreateVolume and DeleteVolume are implemented.
	CreateDeleteVolume bool
	// CloneVolume: CreateVolume accepts a volume as content source.
	CloneVolume bool
	// SingleNodeMultiWriter: the driver knows the SINGLE_NODE_SINGLE_WRITER
	// and SINGLE_NODE_MULTI_WRITER access modes.
	SingleNodeMultiWriter bool
	// GetCapacity: the driver reports its free capacity (GET_CAPACITY).
	GetCapacity bool
}

// DriverInfo is the driver's identity and capabilities.
type DriverInfo struct {
	Name          string
	VendorVersion string
	Capabilities  Capabilities
}

// Probe asks the driver whether it is ready. A driver that does not say
// (no ready field) is ready, as the CSI spec asks.
func Probe(ctx context.Context, conn grpc.ClientConnInterface) error {
	rsp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return fmt.Errorf("probing the CSI driver: %w", err)
	}
	if r := rsp.GetReady(); r != nil && !r.GetValue() {
		return errors.New("the CSI driver says it is not ready (Probe)")
	}
	return nil
}

// WaitForDriver probes the driver until it is ready or ctx ends; each probe
// is bounded by timeout.
func WaitForDriver(ctx context.Context, conn grpc.ClientConnInterface, timeout time.Duration) error {
	logger := klog.FromContext(ctx)
	delay := 100 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := Probe(pctx, conn)
		cancel()
		if err == nil {
			return nil
		}
		logger.Info("Waiting for the CSI driver to be ready", "err", err)
		select {
		case <-ctx.Done():
			return errors.Join(err, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, reconnectMaxDelay)
	}
}

// GetDriverInfo asks the driver for its name and its plugin and controller
// capabilities.
func GetDriverInfo(ctx context.Context, conn grpc.ClientConnInterface) (DriverInfo, error) {
	identity := csi.NewIdentityClient(conn)
	info, err := identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return DriverInfo{}, fmt.Errorf("asking the CSI driver for its name (GetPluginInfo): %w", err)
	}
	if info.GetName() == "" {
		return DriverInfo{}, errors.New("the CSI driver returned an empty name (GetPluginInfo)")
	}
	out := DriverInfo{Name: info.GetName(), VendorVersion: info.GetVendorVersion()}
	plugin, err := identity.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return DriverInfo{}, fmt.Errorf("asking CSI driver %s for its capabilities (GetPluginCapabilities): %w", out.Name, err)
	}
	for _, c := range plugin.GetCapabilities() {
		switch c.GetService().GetType() {
		case csi.PluginCapability_Service_CONTROLLER_SERVICE:
			out.Capabilities.ControllerService = true
		case csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
			out.Capabilities.Topology = true
		}
	}
	if !out.Capabilities.ControllerService {
		return out, nil
	}
	ctrl, err := csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		return DriverInfo{}, fmt.Errorf("asking CSI driver %s for its controller capabilities (ControllerGetCapabilities): %w", out.Name, err)
	}
	for _, c := range ctrl.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
			out.Capabilities.CreateDeleteVolume = true
		case csi.ControllerServiceCapability_RPC_CLONE_VOLUME:
			out.Capabilities.CloneVolume = true
		case csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			out.Capabilities.SingleNodeMultiWriter = true
		case csi.ControllerServiceCapability_RPC_GET_CAPACITY:
			out.Capabilities.GetCapacity = true
		}
	}
	return out, nil
}
