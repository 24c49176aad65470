// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
)

// BinaryName is the command's name, also its user agent.
const BinaryName = "csi-provisioner"

// NewCommand returns the csi-provisioner command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	return cli.NewCommand(BinaryName,
		"Provision PersistentVolumes with a CSI driver (sidecar of the driver's controller)", o)
}

// Run connects to the driver, checks that it can create volumes, and runs
// the provision controller under the driver's name until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	conn, err := connection.Dial(o.CSIAddress)
	if err != nil {
		return fmt.Errorf("--csi-address: %w", err)
	}
	defer func() { _ = conn.Close() }()
	logger.Info("Connecting to the CSI driver", "address", o.CSIAddress)
	if err := connection.WaitForConnection(ctx, conn); err != nil {
		return err
	}
	if err := connection.WaitForDriver(ctx, conn, o.callTimeout()); err != nil {
		return err
	}
	infoCtx, cancel := o.callContext(ctx)
	info, err := connection.GetDriverInfo(infoCtx, conn)
	cancel()
	if err != nil {
		return err
	}
	logger.Info("Found the CSI driver", "driver", info.Name, "version", info.VendorVersion, "capabilities", info.Capabilities)
	if !info.Capabilities.ControllerService || !info.Capabilities.CreateDeleteVolume {
		return fmt.Errorf("CSI driver %s does not support CREATE_DELETE_VOLUME (ControllerGetCapabilities): "+
			"it cannot create volumes, so csi-provisioner has nothing to do; remove it from this driver's deployment", info.Name)
	}

	clients, err := o.NewClients(BinaryName)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(clients.Config)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// Node and CSINode caches only for drivers with topology: on a large
	// cluster the Node cache is the provisioner's biggest.
	var factory informers.SharedInformerFactory
	if info.Capabilities.Topology {
		// Trimmed as the controller's own: of a node, labels, taints and
		// addresses, not its image list.
		factory = controller.NewInformerFactory(clients.Kube, controller.DefaultResyncPeriod, nil)
	}
	prov, err := provisioner.New(provisioner.Config{
		DriverName:            info.Name,
		Identity:              provisioner.NewIdentity(info.Name, time.Now()),
		Capabilities:          info.Capabilities,
		Controller:            csi.NewControllerClient(conn),
		Client:                clients.Kube,
		Dynamic:               dyn,
		Informers:             factory,
		ExtraCreateMetadata:   o.ExtraCreateMetadata,
		DefaultFSType:         o.DefaultFSType,
		StrictTopology:        o.StrictTopology,
		ImmediateTopology:     o.ImmediateTopology,
		ForwardPVCLabels:      o.ForwardPVCLabels,
		ForwardPVCAnnotations: o.ForwardPVCAnnotations,
	})
	if err != nil {
		return err
	}
	if factory != nil {
		factory.Start(ctx.Done())
	}
	var p controller.Provisioner = prov
	var nodeOptions []controller.Option // later options win
	if o.NodeDeployment.Enabled {
		if p, nodeOptions, err = o.NodeDeployment.nodeDeployment(ctx, clients.Kube, o.Namespace(), info.Name, prov, o.LeaderElection); err != nil {
			return err
		}
	}
	return o.Common.Run(ctx, clients, info.Name, p, cli.RunOptions{
		Ready: map[string]httpendpoint.Check{"csi-driver": o.driverReady(conn)},
		Controller: append([]controller.Option{
			controller.WithVolumeNameFunc(o.VolumeName),
			// As the upstream sidecar: its finalizer on every PV, so that a PV
			// deleted before its claim still has its volume deleted, and
			// either sidecar can take the other's PVs.
			controller.WithFinalizer(true),
			controller.WithFinalizerName(controller.SigStorageLibFinalizer),
			// Old and new replicas of a rolling update elect one leader.
			controller.WithLeaseName(UpstreamLeaseName(info.Name)),
			// Final errors are retried forever, with backoff up to
			// --retry-interval-max, as the upstream sidecar does.
			controller.WithFailedProvisionThreshold(0),
			controller.WithFailedDeleteThreshold(0),
		}, nodeOptions...),
	})
}

// UpstreamLeaseName is the name of the leader Lease the CSI
// external-provisioner uses for a driver: every character other than a
// letter, a digit or '-' becomes '-', and a trailing '-' gets an 'X'.
func UpstreamLeaseName(driver string) string {
	b := []byte(driver)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 0 && b[len(b)-1] == '-' {
		b = append(b, 'X')
	}
	return string(b)
}

// driverReady is the readiness check of the driver: its Probe answers ready.
func (o *Options) driverReady(conn grpc.ClientConnInterface) httpendpoint.Check {
	return func(r *http.Request) error {
		ctx, cancel := o.callContext(r.Context())
		defer cancel()
		return connection.Probe(ctx, conn)
	}
}

// callTimeout bounds one call to the driver outside provisioning; --timeout
// 0 (no bound on operations) still must not let a hung driver block startup.
func (o *Options) callTimeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

func (o *Options) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.callTimeout())
}
