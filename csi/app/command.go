// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/cloneprotection"
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
	for _, f := range o.ignoredFlags() {
		logger.Info("Ignoring flag", "flag", f.flag, "reason", f.reason)
	}
	registry := prometheus.NewRegistry()
	metrics, err := connection.NewMetrics(registry)
	if err != nil {
		return err
	}
	conn, info, err := o.connectDriver(ctx, metrics)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

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
	// Trimmed as the controller's own: of a node, labels, taints and
	// addresses, not its image list. The provisioner registers the Node and
	// CSINode caches only for drivers with topology: on a large cluster the
	// Node cache is the provisioner's biggest.
	factory := controller.NewInformerFactory(clients.Kube, controller.DefaultResyncPeriod, nil)
	deps := activeTaskDeps{clients: clients, dyn: dyn, info: info, conn: conn, factory: factory, registry: registry}
	prov, err := o.newProvisioner(deps)
	if err != nil {
		return err
	}
	deps.prov = prov
	ctrlOpts := o.controllerOptions(ctx, prov, info.Name)
	tasks, err := o.activeTasks(ctx, deps)
	if err != nil {
		return err
	}
	ctrlOpts = append(ctrlOpts, tasks...)
	var p controller.Provisioner = prov
	if o.NodeDeployment.Enabled {
		var nodeOptions []controller.Option // later options win
		if p, nodeOptions, err = o.NodeDeployment.nodeDeployment(ctx, clients.Kube, o.Namespace(), info.Name, prov, o.LeaderElection); err != nil {
			return err
		}
		ctrlOpts = append(ctrlOpts, nodeOptions...)
	}
	factory.Start(ctx.Done())
	return o.Common.Run(ctx, clients, info.Name, p, cli.RunOptions{
		Ready:      map[string]httpendpoint.Check{"csi-driver": o.driverReady(conn)},
		Controller: ctrlOpts,
		Registry:   registry,
	})
}

// newProvisioner makes the provisioner of the driver d.info from the flags.
func (o *Options) newProvisioner(d activeTaskDeps) (*provisioner.Provisioner, error) {
	return provisioner.New(provisioner.Config{
		DriverName:                  d.info.Name,
		IgnoreVolumeAttributesClass: !o.FeatureGates[string(VolumeAttributesClass)],
		CrossNamespaceDataSources:   o.FeatureGates[string(CrossNamespaceVolumeDataSource)],
		Identity:                    provisioner.NewIdentity(d.info.Name, time.Now()),
		Capabilities:                d.info.Capabilities,
		Controller:                  csi.NewControllerClient(d.conn),
		Client:                      d.clients.Kube,
		Dynamic:                     d.dyn,
		Informers:                   d.factory,
		ExtraCreateMetadata:         o.ExtraCreateMetadata,
		DefaultFSType:               o.DefaultFSType,
		StrictTopology:              o.StrictTopology,
		ImmediateTopology:           o.ImmediateTopology,
		ForwardPVCLabels:            o.ForwardPVCLabels,
		ForwardPVCAnnotations:       o.ForwardPVCAnnotations,

		ControllerPublishReadOnly:   o.ControllerPublishReadOnly,
		PreventVolumeModeConversion: o.PreventVolumeModeConversion,
	})
}

// controllerOptions are the provision controller's options that make it
// behave as the upstream sidecar, for the driver driverName; with CSI
// migration, it also serves the in-tree plugin's classes.
func (o *Options) controllerOptions(ctx context.Context, prov *provisioner.Provisioner, driverName string) []controller.Option {
	ctrlOpts := []controller.Option{
		controller.WithVolumeNameFunc(o.VolumeName),
		// As the upstream sidecar: its finalizer on every PV, so that a PV
		// deleted before its claim still has its volume deleted, and
		// either sidecar can take the other's PVs.
		controller.WithFinalizer(true),
		controller.WithFinalizerName(controller.SigStorageLibFinalizer),
		// Old and new replicas of a rolling update elect one leader.
		controller.WithLeaseName(UpstreamLeaseName(driverName)),
		// Final errors are retried forever, with backoff up to
		// --retry-interval-max, as the upstream sidecar does.
		controller.WithFailedProvisionThreshold(0),
		controller.WithFailedDeleteThreshold(0),
		// As sig-storage-lib v13 under the upstream sidecar: static PVs of
		// the driver and PVs migrated to it are deleted too.
		controller.WithUnprovisionedVolumeDeletion(true),
	}
	if inTree := prov.InTreePluginName(); inTree != "" {
		klog.FromContext(ctx).Info("Also serving the StorageClasses of the in-tree plugin this driver replaces (CSI migration)", "driver", driverName, "inTreePlugin", inTree)
		ctrlOpts = append(ctrlOpts, controller.WithExtraProvisionerNames(inTree))
	}
	return ctrlOpts
}

// connectDriver dials the driver, waits for it, and returns its connection
// and what it says of itself, refusing a driver that cannot create volumes
// (or report capacity, with --enable-capacity).
func (o *Options) connectDriver(ctx context.Context, metrics *connection.Metrics) (*grpc.ClientConn, connection.DriverInfo, error) {
	logger := klog.FromContext(ctx)
	conn, err := connection.Dial(o.CSIAddress, metrics.Interceptor())
	if err != nil {
		return nil, connection.DriverInfo{}, fmt.Errorf("--csi-address: %w", err)
	}
	info, err := o.driverInfo(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, info, err
	}
	metrics.SetDriverName(info.Name)
	logger.Info("Found the CSI driver", "driver", info.Name, "version", info.VendorVersion, "capabilities", info.Capabilities)
	if info.Capabilities.Topology && !o.FeatureGates[string(Topology)] {
		logger.Info("Ignoring the driver's topology: feature gate Topology is off", "driver", info.Name)
		info.Capabilities.Topology = false
	}
	err = nil
	if !info.Capabilities.ControllerService || !info.Capabilities.CreateDeleteVolume {
		err = fmt.Errorf("CSI driver %s does not support CREATE_DELETE_VOLUME (ControllerGetCapabilities): "+
			"it cannot create volumes, so csi-provisioner has nothing to do; remove it from this driver's deployment", info.Name)
	} else if o.Capacity.Enabled && !info.Capabilities.GetCapacity {
		err = fmt.Errorf("--enable-capacity: CSI driver %s does not support GET_CAPACITY (ControllerGetCapabilities), "+
			"so it cannot report the capacity to publish; remove --enable-capacity", info.Name)
	}
	if err != nil {
		_ = conn.Close()
		return nil, info, err
	}
	return conn, info, nil
}

// driverInfo waits for the driver to answer and asks its name and
// capabilities.
func (o *Options) driverInfo(ctx context.Context, conn *grpc.ClientConn) (connection.DriverInfo, error) {
	klog.FromContext(ctx).Info("Connecting to the CSI driver", "address", o.CSIAddress)
	if err := connection.WaitForConnection(ctx, conn); err != nil {
		return connection.DriverInfo{}, err
	}
	if err := connection.WaitForDriver(ctx, conn, o.callTimeout()); err != nil {
		return connection.DriverInfo{}, err
	}
	infoCtx, cancel := o.callContext(ctx)
	defer cancel()
	return connection.GetDriverInfo(infoCtx, conn)
}

// activeTaskDeps is what the provisioner and the active replica's tasks are
// built from.
type activeTaskDeps struct {
	clients  *cli.Clients
	dyn      dynamic.Interface
	info     connection.DriverInfo
	conn     *grpc.ClientConn
	factory  informers.SharedInformerFactory
	registry *prometheus.Registry
	prov     *provisioner.Provisioner
}

// activeTasks are the controller options for what only the active replica
// runs beside provisioning: cloning protection, the snapshot protection
// sweep, capacity publishing.
func (o *Options) activeTasks(ctx context.Context, d activeTaskDeps) ([]controller.Option, error) {
	var opts []controller.Option
	if d.info.Capabilities.CloneVolume {
		// The lib's claim cache, shared: no second copy of every claim.
		opts = append(opts, controller.WithInformerFactory(d.factory))
		protection, err := cloneprotection.New(d.clients.Kube, d.factory.Core().V1().PersistentVolumeClaims(),
			provisioner.CrossNamespaceAccess{Enabled: o.FeatureGates[string(CrossNamespaceVolumeDataSource)], Dynamic: d.dyn}, o.CloningProtectionThreads)
		if err != nil {
			return nil, err
		}
		// The active replica clones, so it lets go of the sources.
		opts = append(opts, controller.WithActiveTask(func(ctx context.Context) {
			if err := protection.Run(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Cloning protection stopped")
			}
		}))
	}
	switch {
	case o.SnapshotOrphanSweepInterval == 0:
	case o.NodeDeployment.Enabled:
		// Each instance knows only its own restores: its sweep could take
		// the protection from another node's.
		klog.FromContext(ctx).Info("Not sweeping VolumeSnapshot protection finalizers: with --node-deployment each instance knows only its own restores",
			"flag", "--snapshot-orphan-sweep-interval")
	default:
		// The active replica restores, so it lets go of the snapshots.
		opts = append(opts, controller.WithActiveTask(func(ctx context.Context) {
			d.prov.RunSnapshotProtectionSweep(ctx, o.SnapshotOrphanSweepInterval)
		}))
	}
	if o.Capacity.Enabled {
		capacityController, err := o.newCapacityController(ctx, d.clients, d.info, d.conn, d.factory, d.registry)
		if err != nil {
			return nil, err
		}
		// Only the active replica (the leader) publishes: two would each
		// create objects for the same class and segment. With
		// --node-deployment every instance is active and publishes its
		// own node's segment only.
		opts = append(opts, controller.WithActiveTask(func(ctx context.Context) {
			if err := capacityController.Run(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Storage capacity tracking stopped")
			}
		}))
	}
	return opts, nil
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

// ignored is a flag accepted for compatibility with external-provisioner
// that changes nothing here, and why.
type ignored struct{ flag, reason string }

// ignoredFlags are the flags given (on the command line or in the
// environment) that have no effect, each with the reason, for one log line
// at startup: a user moving from external-provisioner keeps the arguments
// and learns what they do not do here.
func (o *Options) ignoredFlags() []ignored {
	given := func(name string) bool { return o.flags != nil && o.flags.Changed(name) }
	var out []ignored
	if given("automaxprocs") {
		out = append(out, ignored{"--automaxprocs", "Go (1.25 and later) sets GOMAXPROCS from the container's CPU limit itself"})
	}
	return out
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
