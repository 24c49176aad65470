// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/gidallocator"
	"github.com/kubeprov/external-storage/lib/httpendpoint"
	"github.com/kubeprov/external-storage/nfs/pkg/dirs"
	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	"github.com/kubeprov/external-storage/nfs/pkg/quota"
	"github.com/kubeprov/external-storage/nfs/pkg/server"
	"github.com/kubeprov/external-storage/nfs/pkg/subdir"
	"github.com/kubeprov/external-storage/nfs/pkg/supervisor"
)

// BinaryName is the binary's name.
const BinaryName = "nfs-provisioner"

// recoveryDir is Ganesha's NFSv4 recovery directory inside the export root:
// persistent, so that clients can reclaim their state after a restart
// instead of hanging.
const recoveryDir = ".ganesha-recovery"

// shareCheckTimeout bounds the start-up check of subdir mode's shares: a
// hung NFS mount never answers.
const shareCheckTimeout = 30 * time.Second

// NewCommand returns the nfs-provisioner command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	return cli.NewCommand(BinaryName, "Provisions NFS volumes: exports of its own NFS-Ganesha (server mode) or directories of an existing export (subdir mode).", o)
}

// Run runs the provisioner until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	clients, err := o.NewClients(BinaryName)
	if err != nil {
		return err
	}
	var (
		p     controller.Provisioner
		ready func(context.Context) error
		opts  []controller.Option
	)
	switch o.Mode {
	case ModeServer:
		sp, stop, err := o.serverMode(ctx, clients.Kube)
		if err != nil {
			return err
		}
		defer stop()
		p, ready = sp, sp.Ready
	default:
		// Subdir mode reads the other volumes' NFS paths: the controller's
		// informers, shared, keep them.
		factory := controller.NewInformerFactory(clients.Kube, controller.DefaultResyncPeriod, func(full, cached *corev1.PersistentVolume) {
			cached.Spec.NFS = full.Spec.NFS
		})
		cfg, err := o.SubdirConfig()
		if err != nil {
			return err
		}
		cfg.Volumes = factory.Core().V1().PersistentVolumes().Lister()
		sp, err := subdir.New(cfg)
		if err != nil {
			return err
		}
		// Refuse to start with a share that is not mounted, naming it,
		// rather than fail every claim of its classes later.
		cctx, cancel := context.WithTimeout(ctx, shareCheckTimeout)
		err = sp.CheckShares(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("subdir mode: %w", err)
		}
		p, ready = sp, sp.Ready
		opts = append(opts, controller.WithInformerFactory(factory))
	}
	return o.Common.Run(ctx, clients, o.Provisioner, p, cli.RunOptions{
		Ready:      map[string]httpendpoint.Check{o.Mode: func(r *http.Request) error { return ready(r.Context()) }},
		Controller: opts,
	})
}

// serverMode prepares the export root and Ganesha (starting the daemons with
// --run-server) and returns the provisioner and a function that stops what
// was started.
func (o *Options) serverMode(ctx context.Context, kube kubernetes.Interface) (*server.Provisioner, func(), error) {
	identity, err := o.prepareExportRoot()
	if err != nil {
		return nil, nil, err
	}
	if err := o.prepareGaneshaConfig(ctx); err != nil {
		return nil, nil, err
	}
	bus, stop, err := o.startGanesha(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := o.newServer(ctx, kube, identity, bus)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return p, stop, nil
}

// prepareExportRoot makes the export root, checks that Ganesha can export
// it, and returns the server's identity kept there.
func (o *Options) prepareExportRoot() (string, error) {
	// Ganesha serves the export root to clients of any uid: world-traversable.
	if err := os.MkdirAll(o.ExportRoot, 0o755); err != nil { //nolint:gosec // G301: see above
		return "", fmt.Errorf("--export-root: %w", err)
	}
	// Refuse a file system Ganesha cannot export at start, rather than every
	// claim later with Ganesha's "invalid param value".
	if err := ganesha.CheckFileHandles(o.ExportRoot); err != nil {
		return "", fmt.Errorf("--export-root: %w", err)
	}
	identity, err := server.LoadIdentity(o.ExportRoot)
	if err != nil {
		return "", fmt.Errorf("--export-root: %w", err)
	}
	return identity, nil
}

// prepareGaneshaConfig writes Ganesha's configuration if there is none,
// checks that an existing one agrees with --device-based-fsids when given,
// and that it parses.
func (o *Options) prepareGaneshaConfig(ctx context.Context) error {
	var fsidDevice *bool
	if o.given("device-based-fsids") {
		fsidDevice = &o.DeviceBasedFsids
	}
	wrote, err := ganesha.EnsureConfig(o.GaneshaConfig, ganesha.BaseOptions{
		BindAddress:  o.BindAddress,
		GracePeriod:  o.GracePeriod,
		RecoveryRoot: filepath.Join(o.ExportRoot, recoveryDir),
		FsidDevice:   fsidDevice,
	})
	if err != nil {
		return fmt.Errorf("--ganesha-config: %w", err)
	}
	if !wrote && fsidDevice != nil {
		if err := ganesha.CheckFsidDevice(o.GaneshaConfig, *fsidDevice); err != nil {
			return fmt.Errorf("--device-based-fsids: %w", err)
		}
	}
	if wrote {
		klog.FromContext(ctx).Info("Wrote a new Ganesha configuration", "path", o.GaneshaConfig)
	}
	if _, err := ganesha.ParseFile(o.GaneshaConfig); err != nil {
		return fmt.Errorf("--ganesha-config: %w", err)
	}
	return nil
}

// startGanesha connects to the system bus and, with --run-server, starts
// the daemons; stop undoes both.
func (o *Options) startGanesha(ctx context.Context) (_ *ganesha.Bus, stop func(), _ error) {
	bus := ganesha.NewSystemBus()
	if !o.RunServer {
		return bus, func() { _ = bus.Close() }, nil
	}
	sup, err := ganesha.Start(ctx, ganesha.DaemonOptions{ConfigPath: o.GaneshaConfig, LogFile: o.GaneshaLog, Bus: bus}, supervisor.Options{})
	if err != nil {
		_ = bus.Close()
		return nil, nil, fmt.Errorf("--run-server: %w", err)
	}
	return bus, func() {
		sup.Stop()
		_ = bus.Close()
	}, nil
}

// newServer makes the server mode's provisioner, exporting over bus.
func (o *Options) newServer(ctx context.Context, kube kubernetes.Interface, identity string, bus *ganesha.Bus) (*server.Provisioner, error) {
	var q quota.Quota
	if o.EnableXFSQuota {
		xq, err := quota.NewXFS(ctx, o.ExportRoot)
		if err != nil {
			return nil, err
		}
		q = xq
	}
	addr, err := o.serverAddress(ctx, kube)
	if err != nil {
		return nil, err
	}
	p, err := server.New(server.Config{
		ExportRoot:    o.ExportRoot,
		GaneshaConfig: o.GaneshaConfig,
		Clients:       o.ExportSubnet,
		MaxExports:    o.MaxExports,
		Server:        addr,
		Identity:      identity,
		Exports:       bus,
		Quota:         q,
		GIDs:          gidallocator.NewFromStorage(kube, exportGroups(o.ExportRoot)),
	})
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Server mode ready", "server", addr, "exportRoot", o.ExportRoot, "identity", identity)
	return p, nil
}

// exportGroups reads the volume directories' groups: what the GID table
// is rebuilt from after a restart, rather than PV annotations alone.
func exportGroups(exportRoot string) gidallocator.GroupsInUse {
	return func(context.Context) (map[int]string, error) {
		root, err := os.OpenRoot(exportRoot)
		if err != nil {
			return nil, err
		}
		defer func() { _ = root.Close() }()
		return dirs.Groups(root)
	}
}

// nfsPorts are the ports clients need; a Service without them still works
// for NFSv4-only clients (2049), so a missing one is only a warning.
var nfsPorts = []int32{ganesha.NFSPort, ganesha.MountdPort, ganesha.RPCBind}

// serverAddress is what PVs name as NFS server: --server-hostname, else the
// ClusterIP of --service-name, else --pod-ip, else --node-name.
func (o *Options) serverAddress(ctx context.Context, kube kubernetes.Interface) (string, error) {
	switch {
	case o.ServerHostname != "":
		return o.ServerHostname, nil
	case o.ServiceName != "":
		ns := os.Getenv("POD_NAMESPACE")
		if ns == "" {
			ns = o.Namespace()
		}
		svc, err := kube.CoreV1().Services(ns).Get(ctx, o.ServiceName, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("--service-name: %w", err)
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return "", fmt.Errorf("--service-name: Service %s/%s has no ClusterIP (headless); clients need a stable address", ns, o.ServiceName)
		}
		warnMissingPorts(klog.FromContext(ctx), svc)
		return svc.Spec.ClusterIP, nil
	case o.PodIP != "":
		return o.PodIP, nil
	case o.NodeName != "":
		return o.NodeName, nil
	}
	return "", fmt.Errorf("server mode needs an address for clients: set --server-hostname, --service-name (with POD_NAMESPACE), --pod-ip (POD_IP) or --node-name (NODE_NAME)")
}

func warnMissingPorts(logger klog.Logger, svc *corev1.Service) {
	for _, want := range nfsPorts {
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == want }) {
			logger.Info("Warning: the Service does not expose an NFS port; some clients may fail to mount",
				"service", klog.KObj(svc), "port", want)
		}
	}
}
