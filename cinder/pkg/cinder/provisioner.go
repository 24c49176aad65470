// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cinder is a provisioner that uses Cinder as a storage service for
// any cluster: it creates a Cinder volume, asks Cinder how to connect to it
// and writes a PV of the native kind (iSCSI, RBD, Fibre Channel), so that
// the kubelet attaches it with no OpenStack code on the nodes.
//
// Provision: find the volume named after the PV (a retry finds it instead of
// creating a second), or create it; wait until available; os-reserve;
// os-initialize_connection with the connector; map the answer to a volume
// source (package mapper); create the per-volume CHAP Secret if there is
// one. Any failure undoes the steps done, in reverse order, so that nothing
// is left in Cinder. Delete: remove the Secret, os-terminate_connection,
// os-unreserve, delete, and wait until the volume is gone.
package cinder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/cinder/pkg/mapper"
	"github.com/kubeprov/external-storage/lib/capacity"
	"github.com/kubeprov/external-storage/lib/controller"
)

// PV annotations. The first two keep the names the original standalone
// Cinder provisioner used, so its PVs are recognized.
const (
	// AnnVolumeID is the Cinder volume id.
	AnnVolumeID = "cinderVolumeId"
	// AnnIdentity is the identity of the provisioner instance that created
	// the volume; other instances leave the PV alone.
	AnnIdentity = "standaloneCinderProvisionerIdentity"
	// AnnConnector is the connector the connection was made with (JSON), so
	// that Delete terminates that connection even if the flags changed.
	AnnConnector = "kubeprov.io/cinder-connector"
	// AnnAuthSecret is "<namespace>/<name>" of the per-volume Secret the
	// provisioner created (iSCSI CHAP); it is deleted with the volume.
	AnnAuthSecret = "kubeprov.io/cinder-auth-secret" //nolint:gosec // G101: an annotation key, not a credential
)

// Labels of the Secrets the provisioner creates.
const (
	LabelManagedBy = controller.LabelManagedBy
	ManagedBy      = "cinder-provisioner"
	// LabelPV names the PV a Secret belongs to; only such Secrets are
	// updated or deleted.
	LabelPV = "kubeprov.io/cinder-pv"
)

// Metadata set on the Cinder volumes, for operators looking at Cinder and
// for the ownership check when a retry finds a volume by name.
const (
	MetaPVName   = "kubeprov.io/pv-name"
	MetaClaim    = "kubeprov.io/pvc"
	MetaIdentity = "kubeprov.io/provisioner-identity"
)

// Defaults of the options.
const (
	// DefaultPollInterval is how often a volume's status is read while
	// waiting for it to become available or to be deleted.
	DefaultPollInterval = time.Second
	// DefaultRollbackTimeout bounds undoing a failed provisioning; it runs
	// even when the operation's own context has ended.
	DefaultRollbackTimeout = 2 * time.Minute
	// DefaultStuckCreatingTimeout is how long a volume of this provisioner
	// may stay "creating" before it is taken as stuck (cinder-api died
	// before handing it to the scheduler, or the volume service died while
	// creating it), force-deleted and created again.
	DefaultStuckCreatingTimeout = 5 * time.Minute
)

// Option configures a Provisioner.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	connector       Connector
	secretNamespace string
	pollInterval    time.Duration
	rollbackTimeout time.Duration
	stuckCreating   time.Duration
	topologyKey     string
}

// WithConnector sets the connector sent to Cinder. Default: no initiator,
// platform DefaultPlatform(), os_type DefaultOSType.
func WithConnector(c Connector) Option {
	return optionFunc(func(cfg *config) error { cfg.connector = c; return nil })
}

// WithSecretNamespace puts the per-volume CHAP Secrets in one namespace
// instead of the claim's. Default "": the claim's namespace.
func WithSecretNamespace(ns string) Option {
	return optionFunc(func(cfg *config) error { cfg.secretNamespace = ns; return nil })
}

// WithPollInterval sets DefaultPollInterval's value.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(cfg *config) error {
		if d <= 0 {
			return fmt.Errorf("WithPollInterval: must be more than 0, got %v", d)
		}
		cfg.pollInterval = d
		return nil
	})
}

// WithRollbackTimeout sets DefaultRollbackTimeout's value.
func WithRollbackTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *config) error {
		if d <= 0 {
			return fmt.Errorf("WithRollbackTimeout: must be more than 0, got %v", d)
		}
		cfg.rollbackTimeout = d
		return nil
	})
}

// WithStuckCreatingTimeout sets DefaultStuckCreatingTimeout's value. Set it
// well above the time the slowest backend takes to create a volume: Cinder
// reports no progress, so a volume creating for longer is deleted.
func WithStuckCreatingTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *config) error {
		if d <= 0 {
			return fmt.Errorf("WithStuckCreatingTimeout: must be more than 0, got %v", d)
		}
		cfg.stuckCreating = d
		return nil
	})
}

// Provisioner implements controller.Provisioner on Cinder.
type Provisioner struct {
	volumes  *gophercloud.ServiceClient
	kube     kubernetes.Interface
	identity string
	cfg      config
}

var (
	_ controller.Provisioner        = (*Provisioner)(nil)
	_ controller.BlockProvisioner   = (*Provisioner)(nil)
	_ controller.SelectedNodeReader = (*Provisioner)(nil)
)

// New returns a Provisioner that manages volumes through the block storage
// v3 client and Secrets through kube. identity is written on every PV and
// volume it creates; PVs with another identity are not deleted.
func New(client *gophercloud.ServiceClient, kube kubernetes.Interface, identity string, opts ...Option) (*Provisioner, error) {
	if client == nil || kube == nil {
		return nil, errors.New("cinder.New: a Cinder client and a Kubernetes client are required")
	}
	if identity == "" {
		return nil, errors.New("cinder.New: identity is required")
	}
	cfg := config{
		connector:       Connector{Platform: DefaultPlatform(), OSType: DefaultOSType},
		pollInterval:    DefaultPollInterval,
		rollbackTimeout: DefaultRollbackTimeout,
		topologyKey:     DefaultTopologyKey,
		stuckCreating:   DefaultStuckCreatingTimeout,
	}
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	return &Provisioner{volumes: client, kube: kube, identity: identity, cfg: cfg}, nil
}

// SupportsBlock implements controller.BlockProvisioner: iSCSI, RBD and FC
// volumes can all be raw block devices.
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// Provision implements controller.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	req, state, err := p.checkRequest(o)
	if err != nil {
		return nil, state, err
	}
	logger := klog.FromContext(ctx).WithValues("pv", o.PVName)
	ctx = klog.NewContext(ctx, logger)
	if req.zone != "" {
		logger.V(2).Info("Chose the availability zone", "zone", req.zone, "from", req.zoneSource)
	}

	vol, stuckAt, state, err := p.findOrCreate(ctx, o, req.cp, req.zone, req.size)
	if err != nil {
		return nil, state, err
	}
	// The steps below use id: vol is replaced by each status read.
	id := vol.ID
	logger = logger.WithValues("volumeID", id)
	ctx = klog.NewContext(ctx, logger)

	op := &operation{p: p, id: id}
	op.push("delete volume", func(ctx context.Context) error {
		return deleteVolume(ctx, p.volumes, id, p.cfg.pollInterval)
	})
	vol, state, err = p.awaitAvailable(ctx, op, id, stuckAt)
	if err != nil {
		return nil, state, err
	}
	if err := p.reserve(ctx, op, vol, id); err != nil {
		return op.fail(ctx, err)
	}

	res, ann, err := p.connect(ctx, op, o, req.cp, id)
	if err != nil {
		return op.fail(ctx, err)
	}
	p.deleteDuplicatesNow(ctx, o.PVName, id)
	volZone := volumeZone(logger, vol, req.zone)
	logger.V(2).Info("Provisioned Cinder volume", "sizeGiB", vol.Size, "zone", volZone)
	return o.NewVolume(controller.VolumeSpec{
		Source:       res.Source,
		Capacity:     *resource.NewQuantity(int64(vol.Size)*capacity.GiB, resource.BinarySI),
		NodeAffinity: p.nodeAffinity(volZone),
		Annotations:  ann,
	}), controller.ProvisioningFinished, nil
}

// provisionRequest is what a claim asks of Cinder, checked before Cinder
// is called.
type provisionRequest struct {
	cp   classParams
	size int
	// zone is the availability zone to create the volume in ("" lets Cinder
	// choose) and zoneSource what chose it, for the log.
	zone, zoneSource string
}

// checkRequest reads the class parameters, access modes, size and zone of
// the claim. Errors come with the state the controller must assume.
func (p *Provisioner) checkRequest(o controller.ProvisionOptions) (*provisionRequest, controller.ProvisioningState, error) {
	class := o.StorageClass
	if class == nil {
		class = &storagev1.StorageClass{}
	}
	cp, err := parseParams(class)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// A block device is written by one node at a time.
	if err := controller.CheckAccessModes(o.PVC, corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadOnlyMany); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("%w: Cinder volumes are block devices written by one node at a time", err)
	}
	size, err := sizeGiB(o.PVC.Spec.Resources.Requests[corev1.ResourceStorage])
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	zone, zoneSource, err := p.availabilityZone(o, class, cp)
	if err != nil {
		var ze *zoneError
		if errors.As(err, &ze) {
			return nil, ze.state, err
		}
		return nil, controller.ProvisioningFinished, err
	}
	return &provisionRequest{cp: cp, size: size, zone: zone, zoneSource: zoneSource}, controller.ProvisioningFinished, nil
}

// awaitAvailable waits until volume id is available (or reserved, or in
// use: an earlier attempt got further). A volume in error is rolled back;
// one still creating is kept for the retry to pick up by name. Errors come
// with the state the controller must assume.
func (p *Provisioner) awaitAvailable(ctx context.Context, op *operation, id string, stuckAt time.Time) (*volumes.Volume, controller.ProvisioningState, error) {
	// The wait ends when the volume would count as stuck, so that the next
	// attempt replaces it instead of waiting for the operation's timeout.
	waitCtx := ctx
	if !stuckAt.IsZero() {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, stuckAt)
		defer cancel()
	}
	vol, err := waitAvailable(waitCtx, p.volumes, id, p.cfg.pollInterval)
	if err == nil {
		return vol, controller.ProvisioningNoChange, nil
	}
	var se *statusError
	if errors.As(err, &se) {
		_, state, err := op.fail(ctx, err)
		return nil, state, err
	}
	if ctx.Err() == nil && waitCtx.Err() != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("cinder volume %s is still creating after --stuck-creating-timeout (%s): it is stuck; the next attempt deletes it and creates another", id, p.cfg.stuckCreating)
	}
	// Still creating (or Cinder unreachable): a creating volume cannot
	// be deleted, so keep it and let the retry pick it up by name.
	return nil, controller.ProvisioningInBackground, fmt.Errorf("waiting for Cinder volume %s to become available: %w", id, err)
}

// reserve reserves an available volume for this provisioner's connection
// (one an earlier attempt reserved already is left as it is) and pushes
// the unreserve onto op.
func (p *Provisioner) reserve(ctx context.Context, op *operation, vol *volumes.Volume, id string) error {
	if vol.Status == statusAvailable {
		if err := volumes.Reserve(ctx, p.volumes, id).ExtractErr(); err != nil {
			return fmt.Errorf("reserving Cinder volume %s: %w", id, cinderError(err))
		}
	}
	op.push("unreserve", func(ctx context.Context) error {
		return ignoreNotFound(volumes.Unreserve(ctx, p.volumes, id).ExtractErr())
	})
	return nil
}

// volumeZone is the zone Cinder reports for vol: it may have chosen one,
// or fallen back to its default (allow_availability_zone_fallback). It is
// the zone asked for when Cinder reports none.
func volumeZone(logger klog.Logger, vol *volumes.Volume, asked string) string {
	if vol.AvailabilityZone == "" {
		return asked
	}
	if asked != "" && vol.AvailabilityZone != asked {
		logger.Info("Cinder put the volume in another availability zone than asked; the PV follows Cinder", "asked", asked, "zone", vol.AvailabilityZone)
	}
	return vol.AvailabilityZone
}

// connect exports the volume to this provisioner's connector and maps the
// connection to a PV source, with the PV's annotations (and the Secret an
// RBD connection needs). What it made is pushed onto op for undoing.
func (p *Provisioner) connect(ctx context.Context, op *operation, o controller.ProvisionOptions, cp classParams, id string) (*mapper.Result, map[string]string, error) {
	conn := p.cfg.connector
	info, err := volumes.InitializeConnection(ctx, p.volumes, id, conn.initializeOpts()).Extract()
	if err == nil || !refused(err) {
		// Without an answer, or after a server error, the backend may have
		// exported the volume.
		op.push("terminate connection", func(ctx context.Context) error {
			return ignoreNotFound(volumes.TerminateConnection(ctx, p.volumes, id, conn.terminateOpts()).ExtractErr())
		})
	}
	if err != nil {
		err = fmt.Errorf("initializing a connection to Cinder volume %s: %w", id, cinderError(err))
		if conn.Initiator == "" {
			err = fmt.Errorf("%w (the provisioner has no --initiator-name; iSCSI backends need one)", err)
		}
		return nil, nil, err
	}

	secretNS := p.cfg.secretNamespace
	if secretNS == "" {
		secretNS = o.PVC.Namespace
	}
	driverType, _ := info["driver_volume_type"].(string)
	data, _ := info["data"].(map[string]any)
	res, err := mapper.Map(mapper.Request{
		Connection:         mapper.Connection{DriverVolumeType: driverType, Data: data},
		PVName:             o.PVName,
		ClaimNamespace:     o.PVC.Namespace,
		SecretNamespace:    secretNS,
		InitiatorName:      conn.Initiator,
		FSType:             cp.fsType,
		RBDSecretName:      cp.rbdSecretName,
		RBDSecretNamespace: cp.rbdSecretNamespace,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cinder volume %s: %w", id, err)
	}
	klog.FromContext(ctx).V(2).Info("Mapped the volume's connection", "type", driverType)
	ann := map[string]string{
		AnnVolumeID:  id,
		AnnIdentity:  p.identity,
		AnnConnector: conn.encode(),
	}
	if res.Secret != nil {
		if err := p.ensureSecret(ctx, res.Secret, o.PVName); err != nil {
			return nil, nil, err
		}
		ann[AnnAuthSecret] = res.Secret.Namespace + "/" + res.Secret.Name
	}
	return res, ann, nil
}

// findOrCreate returns this PV's volume: the one an earlier attempt created,
// or a new one, and when that volume counts as stuck if it is still
// creating then (the zero time: never). An earlier attempt's volume that
// is stuck already is deleted and replaced. Errors come with the state the
// controller must assume.
func (p *Provisioner) findOrCreate(ctx context.Context, o controller.ProvisionOptions, cp classParams, zone string, size int) (*volumes.Volume, time.Time, controller.ProvisioningState, error) {
	logger := klog.FromContext(ctx)
	found, err := findByName(ctx, p.volumes, o.PVName)
	if err != nil {
		return nil, time.Time{}, controller.ProvisioningNoChange, fmt.Errorf("listing Cinder volumes named %s: %w", o.PVName, cinderError(err))
	}
	var ours []volumes.Volume
	var others []string
	for _, v := range found {
		if v.Metadata[MetaIdentity] == p.identity {
			ours = append(ours, v)
		} else {
			others = append(others, v.ID)
		}
	}
	switch {
	case len(ours) > 0:
		vol := keeperOf(ours)
		if len(ours) > 1 {
			// Provision deletes the others once this one is ready.
			logger.Info("Found several Cinder volumes of this provisioner for the PV; going on with one, deleting the others", "volumes", len(ours), "volumeID", vol.ID)
		}
		stuckAt := p.stuckAt(vol, o.PVName)
		if stuckAt.IsZero() || time.Now().Before(stuckAt) {
			logger.V(2).Info("Found the Cinder volume of an earlier attempt", "volumeID", vol.ID, "status", vol.Status)
			return vol, stuckAt, controller.ProvisioningNoChange, nil
		}
		if err := p.deleteStuck(ctx, vol); err != nil {
			// The volume may still be there: the controller must retry.
			return nil, time.Time{}, controller.ProvisioningInBackground, err
		}
	case len(others) > 0:
		return nil, time.Time{}, controller.ProvisioningFinished, fmt.Errorf("cinder volume(s) %v named %s exist but were not created by this provisioner (identity %s); they are left alone: remove or rename them", others, o.PVName, p.identity)
	}

	opts := volumes.CreateOpts{
		Name:             o.PVName,
		Size:             size,
		VolumeType:       cp.volumeType,
		AvailabilityZone: zone,
		Description:      fmt.Sprintf("Kubernetes volume %s for claim %s/%s", o.PVName, o.PVC.Namespace, o.PVC.Name),
		Metadata: map[string]string{
			MetaPVName:   o.PVName,
			MetaClaim:    o.PVC.Namespace + "/" + o.PVC.Name,
			MetaIdentity: p.identity,
		},
	}
	vol, err := volumes.Create(ctx, p.volumes, opts, nil).Extract()
	if err != nil {
		state := controller.ProvisioningFinished
		if !refused(err) {
			// No answer, or a server error (sqlite's "database is locked"
			// comes as a 500 after the row may be written): the volume may
			// exist, so the controller must retry, and the retry finds it
			// by name.
			state = controller.ProvisioningInBackground
		}
		return nil, time.Time{}, state, fmt.Errorf("creating a %d GiB Cinder volume (type %q, availability zone %q): %w", size, cp.volumeType, zone, cinderError(err))
	}
	logger.V(2).Info("Created Cinder volume", "volumeID", vol.ID, "sizeGiB", size, "zone", zone)
	// By this clock rather than Cinder's created_at: a Cinder clock behind
	// this one would make every new volume look stuck at once.
	return vol, time.Now().Add(p.cfg.stuckCreating), controller.ProvisioningNoChange, nil
}

// stuckAt is when vol counts as stuck if it is still creating then: its
// creation time plus the stuck-creating timeout. It is zero (never) for a
// volume that is not creating, whose metadata does not name this
// provisioner and pvName, or whose creation time is unknown.
func (p *Provisioner) stuckAt(vol *volumes.Volume, pvName string) time.Time {
	if vol.Status != statusCreating || vol.CreatedAt.IsZero() || vol.Metadata[MetaIdentity] != p.identity || p.checkOwner(vol, pvName) != nil {
		return time.Time{}
	}
	return vol.CreatedAt.Add(p.cfg.stuckCreating)
}

// deleteStuck force-deletes vol, a volume of this provisioner stuck in
// creating, and waits until it is gone. Cinder refuses to delete a creating
// volume; os-force_delete is admin-only by Cinder's default policy, but a
// plain delete is accepted for a volume that was never scheduled (no
// host), which is how cinder-api leaves a volume when it dies before
// casting it to the scheduler. Should the volume become available
// meanwhile, deleting it loses nothing: no one has used it.
func (p *Provisioner) deleteStuck(ctx context.Context, vol *volumes.Volume) error {
	id := vol.ID
	since := vol.CreatedAt.UTC().Format(time.RFC3339)
	klog.FromContext(ctx).Info("Force-deleting a Cinder volume stuck in creating", "volumeID", id,
		"age", time.Since(vol.CreatedAt).Round(time.Second), "createdAt", since)
	err := volumes.ForceDelete(ctx, p.volumes, id).ExtractErr()
	if err != nil && refused(err) && !isNotFound(err) {
		if derr := volumes.Delete(ctx, p.volumes, id, nil).ExtractErr(); derr == nil || isNotFound(derr) {
			err = nil
		}
	}
	if err != nil && !isNotFound(err) {
		msg := fmt.Sprintf("cinder volume %s has been creating since %s (longer than --stuck-creating-timeout, %s): it is stuck", id, since, p.cfg.stuckCreating)
		if refused(err) {
			return fmt.Errorf("%s; delete it with `openstack volume delete --force %s` or `cinder force-delete %s` (force-deleting it: %w)", msg, id, id, cinderError(err))
		}
		return fmt.Errorf("%s; force-deleting it: %w", msg, cinderError(err))
	}
	if err := waitGone(ctx, p.volumes, id, p.cfg.pollInterval); err != nil {
		return fmt.Errorf("waiting for stuck Cinder volume %s to be deleted: %w", id, err)
	}
	klog.FromContext(ctx).Info("Deleted the stuck Cinder volume; creating another", "volumeID", id)
	return nil
}

// operation records the steps of one provisioning so that a failure can
// undo them in reverse order.
type operation struct {
	p     *Provisioner
	id    string
	names []string
	undos []func(context.Context) error
}

func (op *operation) push(name string, undo func(context.Context) error) {
	op.names = append(op.names, name)
	op.undos = append(op.undos, undo)
}

// fail undoes every step and returns err with the state that results:
// Finished when nothing is left, InBackground when something may be (the
// controller then retries, which finds the volume again by name).
func (op *operation) fail(ctx context.Context, err error) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), op.p.cfg.rollbackTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	for i := len(op.undos) - 1; i >= 0; i-- {
		if uerr := op.undos[i](ctx); uerr != nil {
			logger.Error(uerr, "Rolling back failed provisioning", "step", op.names[i])
			return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; rolling back (%s) failed too, will retry: %w", err, op.names[i], cinderError(uerr))
		}
	}
	logger.V(2).Info("Rolled back failed provisioning", "reason", err.Error())
	return nil, controller.ProvisioningFinished, fmt.Errorf("%w (Cinder volume %s was rolled back and deleted)", err, op.id)
}

// Delete implements controller.Provisioner.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	id := pv.Annotations[AnnVolumeID]
	if id == "" {
		return controller.Ignore("PV %s has no %s annotation, so it is no Cinder volume of this provisioner", pv.Name, AnnVolumeID)
	}
	if err := controller.CheckOwner(pv, AnnIdentity, p.identity); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("pv", pv.Name, "volumeID", id)
	ctx = klog.NewContext(ctx, logger)

	conn := p.connectorOf(logger, pv)
	vol, gone, err := p.ownVolume(ctx, id, pv.Name)
	if err != nil {
		return err
	}
	if err := p.deleteDuplicates(ctx, conn, pv.Name, id); err != nil {
		return err
	}
	if ref := pv.Annotations[AnnAuthSecret]; ref != "" {
		if err := p.deleteSecret(ctx, ref, pv.Name); err != nil {
			return err
		}
	}
	if gone {
		logger.V(2).Info("Cinder volume already gone")
		return nil
	}
	if gone, err := p.disconnect(ctx, conn, vol, id); gone || err != nil {
		return err
	}
	if err := deleteVolume(ctx, p.volumes, id, p.cfg.pollInterval); err != nil {
		return err
	}
	logger.V(2).Info("Deleted Cinder volume")
	return nil
}

// connectorOf is the connector pv's connection was made with (AnnConnector),
// so that Delete terminates that connection even if the flags changed; the
// current one when the annotation is missing or unreadable.
func (p *Provisioner) connectorOf(logger klog.Logger, pv *corev1.PersistentVolume) Connector {
	s, ok := pv.Annotations[AnnConnector]
	if !ok {
		return p.cfg.connector
	}
	c, err := decodeConnector(s)
	if err != nil {
		logger.Error(err, "Unreadable connector annotation; terminating with the current connector", "annotation", AnnConnector)
		return p.cfg.connector
	}
	return c
}

// ownVolume reads volume id, which must be the one this provisioner created
// for the PV named pvName; gone says Cinder no longer has it.
func (p *Provisioner) ownVolume(ctx context.Context, id, pvName string) (vol *volumes.Volume, gone bool, err error) {
	vol, err = volumes.Get(ctx, p.volumes, id).Extract()
	if isNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading Cinder volume %s: %w", id, cinderError(err))
	}
	// The annotations are only a claim: the volume's own metadata, which
	// this provisioner wrote, must name it and this PV.
	if err := p.checkOwner(vol, pvName); err != nil {
		return nil, false, err
	}
	return vol, false, nil
}

// disconnect terminates the connection of a volume that is reserved or
// attached, and unreserves it, so that Cinder lets it be deleted. gone
// says Cinder no longer has the volume: nothing is left to delete.
func (p *Provisioner) disconnect(ctx context.Context, conn Connector, vol *volumes.Volume, id string) (gone bool, err error) {
	switch vol.Status {
	case statusAttaching, statusReserved, statusInUse:
	default:
		return false, nil
	}
	if err := volumes.TerminateConnection(ctx, p.volumes, id, conn.terminateOpts()).ExtractErr(); err != nil {
		if isNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("terminating the connection to Cinder volume %s: %w", id, cinderError(err))
	}
	if err := volumes.Unreserve(ctx, p.volumes, id).ExtractErr(); err != nil {
		if isNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("unreserving Cinder volume %s: %w", id, cinderError(err))
	}
	return false, nil
}

// checkOwner makes sure vol is the volume this provisioner created for the
// PV named pvName: its metadata names this instance's identity and the PV.
// Volumes made before the metadata was checked are recognized by their name
// when they carry no identity of any provisioner.
func (p *Provisioner) checkOwner(vol *volumes.Volume, pvName string) error {
	identity, hasIdentity := vol.Metadata[MetaIdentity]
	switch {
	case hasIdentity && identity == p.identity && vol.Metadata[MetaPVName] == pvName:
		return nil
	case !hasIdentity && vol.Name == pvName:
		return nil
	}
	return fmt.Errorf("cinder volume %s, named by annotation %s of PV %s, was not created by this provisioner for this PV (its metadata says PV %q, identity %q; its name is %q): not touching it; fix the annotation or delete the volume by hand",
		vol.ID, AnnVolumeID, pvName, vol.Metadata[MetaPVName], identity, vol.Name)
}

func ignoreNotFound(err error) error {
	if isNotFound(err) {
		return nil
	}
	return err
}

// sizeGiB rounds the request up to whole GiB, Cinder's unit; an empty
// request gets Cinder's smallest volume.
func sizeGiB(q resource.Quantity) (int, error) {
	gib, err := capacity.RoundUpToGiB(q)
	if err != nil {
		return 0, fmt.Errorf("requested size: %w", err)
	}
	return max(gib, 1), nil
}
