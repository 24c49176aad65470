// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package provisioner provisions PersistentVolumes with a CSI driver's
// CreateVolume and deletes them with DeleteVolume: StorageClass parameters
// and secrets, topology, clones and snapshot restores, and the mapping of
// the driver's answers to what the controller must do next.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/lib/capacity"
	"github.com/kubeprov/external-storage/lib/controller"
)

// PV annotations that keep the provisioner secret's reference, so that
// DeleteVolume gets its secrets even after the StorageClass is gone.
const (
	AnnDeletionSecretName      = "volume.kubernetes.io/provisioner-deletion-secret-name"      //nolint:gosec // an annotation key, not a credential
	AnnDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace" //nolint:gosec // an annotation key, not a credential
	// AnnModifySecretName and AnnModifySecretNamespace record the
	// controller-modify secret, for the external-resizer's
	// ControllerModifyVolume (upstream's keys).
	AnnModifySecretName      = "volume.kubernetes.io/controller-modify-secret-name"      //nolint:gosec // an annotation key, not a credential
	AnnModifySecretNamespace = "volume.kubernetes.io/controller-modify-secret-namespace" //nolint:gosec // an annotation key, not a credential
)

// AttrProvisionerIdentity is the volume attribute naming the provisioner
// instance that created a volume, as the CSI external-provisioner sets it;
// drivers and tools read it.
const AttrProvisionerIdentity = "storage.kubernetes.io/csiProvisionerIdentity"

// Config configures a Provisioner.
type Config struct {
	// DriverName is the driver's name (GetPluginInfo), which is also the
	// provisioner name in StorageClasses.
	DriverName string
	// Identity names this provisioner instance in the PVs' volume attribute
	// AttrProvisionerIdentity; empty means NewIdentity's.
	Identity string
	// Capabilities are what the driver said it can do.
	Capabilities connection.Capabilities
	// Controller is the driver's controller service.
	Controller csi.ControllerClient
	// Client reads secrets, clone sources and their volumes.
	Client kubernetes.Interface
	// Dynamic reads VolumeSnapshots; nil means no snapshot restores.
	Dynamic dynamic.Interface
	// Informers provides the VolumeAttachment cache (no volume is deleted
	// while attached) and, when the driver has topology, the Node and
	// CSINode caches. The caller starts it.
	Informers informers.SharedInformerFactory
	// ExtraCreateMetadata adds the claim's and PV's names to the parameters.
	ExtraCreateMetadata bool
	// DefaultFSType is used when the class sets no csi.storage.k8s.io/fstype.
	DefaultFSType string
	// StrictTopology limits a WaitForFirstConsumer volume to the selected node's segment.
	StrictTopology bool
	// ImmediateTopology gives Immediate volumes without allowedTopologies the
	// segments of all nodes of the driver as requirement.
	ImmediateTopology bool
	// CrossNamespaceDataSources allows data sources in other namespaces
	// that a ReferenceGrant there shares (feature gate
	// CrossNamespaceVolumeDataSource).
	CrossNamespaceDataSources bool
	// IgnoreVolumeAttributesClass leaves the claims' VolumeAttributesClass
	// out of CreateVolume and the PV (feature gate VolumeAttributesClass off).
	IgnoreVolumeAttributesClass bool
	// ForwardPVCLabels and ForwardPVCAnnotations are the claim labels and
	// annotations passed to the driver as parameters.
	ForwardPVCLabels, ForwardPVCAnnotations []string
	// ControllerPublishReadOnly marks the PVs of claims whose only access
	// mode is ReadOnlyMany read-only (spec.csi.readOnly), so that
	// ControllerPublishVolume is asked for a read-only attachment.
	ControllerPublishReadOnly bool
	// PreventVolumeModeConversion refuses to restore a snapshot into a
	// volume of another volumeMode than the snapshot's source, unless its
	// VolumeSnapshotContent allows it (AnnAllowVolumeModeChange).
	PreventVolumeModeConversion bool
}

// Provisioner is a controller.Provisioner backed by a CSI driver.
type Provisioner struct {
	cfg            Config
	nodes          corelisters.NodeLister
	csiNodes       storagelisters.CSINodeLister
	topologySynced []cache.InformerSynced
	attachments    cache.Indexer // by attachedPVIndex
	attachSynced   cache.InformerSynced
	// legacyWarned holds the deprecated keys already logged about.
	legacyWarned sync.Map
	// migration is nil unless the driver replaces an in-tree plugin.
	migration *migration
	// snapshotUsers counts, by namespace/name, the Provision calls between
	// protecting a VolumeSnapshot and letting it go; snapshotMu orders
	// them with the sweep, which leaves those snapshots alone.
	snapshotMu    sync.Mutex
	snapshotUsers map[string]int
}

var (
	_ controller.Provisioner           = (*Provisioner)(nil)
	_ controller.BlockProvisioner      = (*Provisioner)(nil)
	_ controller.DataSourceProvisioner = (*Provisioner)(nil)
	_ controller.ClaimMetadataReader   = (*Provisioner)(nil)
	_ controller.RecordedAssetDeleter  = (*Provisioner)(nil)
)

// New returns a Provisioner. With the topology capability it registers
// Node and CSINode informers on cfg.Informers, which must be started after.
func New(cfg Config) (*Provisioner, error) {
	var errs []error
	if cfg.DriverName == "" {
		errs = append(errs, errors.New("the driver name is required"))
	}

	if cfg.Controller == nil {
		errs = append(errs, errors.New("the controller client is required"))
	}
	if cfg.Client == nil {
		errs = append(errs, errors.New("the Kubernetes client is required"))
	}
	if cfg.Informers == nil {
		errs = append(errs, errors.New("an informer factory is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Identity == "" {
		cfg.Identity = NewIdentity(cfg.DriverName, time.Now())
	}
	p := &Provisioner{cfg: cfg, migration: newMigration(cfg.DriverName)}
	attachments := cfg.Informers.Storage().V1().VolumeAttachments().Informer()
	if err := attachments.AddIndexers(cache.Indexers{attachedPVIndex: attachedPV}); err != nil {
		return nil, fmt.Errorf("indexing VolumeAttachments: %w", err)
	}
	p.attachments, p.attachSynced = attachments.GetIndexer(), attachments.HasSynced
	if cfg.Capabilities.Topology {
		nodes := cfg.Informers.Core().V1().Nodes()
		csiNodes := cfg.Informers.Storage().V1().CSINodes()
		p.nodes, p.csiNodes = nodes.Lister(), csiNodes.Lister()
		p.topologySynced = []cache.InformerSynced{nodes.Informer().HasSynced, csiNodes.Informer().HasSynced}
	}
	return p, nil
}

// SupportsBlock is true: CSI has block volumes, and a driver without them
// rejects the request with a message of its own.
func (p *Provisioner) SupportsBlock(context.Context) bool { return true }

// ClaimMetadataKeys implements controller.ClaimMetadataReader: the labels and
// annotations forwarded to the driver, and those the class's secret
// templates name.
func (p *Provisioner) ClaimMetadataKeys(class *storagev1.StorageClass) (labels, annotations []string) {
	annotations = slices.Clone(p.cfg.ForwardPVCAnnotations)
	if class != nil {
		annotations = append(annotations, templateAnnotations(class.Parameters)...)
	}
	return p.cfg.ForwardPVCLabels, annotations
}

// SupportsDataSource implements controller.DataSourceProvisioner: clones and
// snapshots go to the driver (contentSource checks them), and claims of a
// volume populator are left to it (checkDataSourceKind).
func (p *Provisioner) SupportsDataSource(context.Context, *corev1.PersistentVolumeClaim) bool {
	return true
}

// Provision creates the volume with CreateVolume, named after the PV so that
// a repeated call finds the same volume.
//
// Failures before CreateVolume is called return ProvisioningNoChange: this
// call created nothing, and an earlier call that may still complete in the
// driver (a timeout) must stay tracked so that its volume is not leaked.
// The controller reports these failures like final ones.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.StorageClass == nil || o.PVC == nil {
		return nil, controller.ProvisioningNoChange, errors.New("no StorageClass or claim to provision for")
	}
	if err := checkDataSourceKind(o.PVC); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if err := p.migration.checkClaim(o.PVC, p.cfg.DriverName); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	class, migrated, err := p.csiClass(ctx, o.StorageClass)
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	o.StorageClass = class
	params, err := parseParameters(o.StorageClass.Parameters)
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	p.warnLegacy(ctx, o.StorageClass.Name, params.legacyKeys)
	refs, err := params.resolveSecrets(templateValues{pvName: o.PVName, claim: o.PVC})
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	req, fsType, err := p.createRequest(o, params)
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	snapshot, state, err := p.completeRequest(ctx, o, req, params, refs)
	if err != nil {
		return nil, state, err
	}

	if snapshot == nil {
		return p.create(ctx, o, req, fsType, refs, migrated)
	}
	done, err := p.protectSnapshot(ctx, snapshot)
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	pv, state, err := p.create(ctx, o, req, fsType, refs, migrated)
	// Protected until the restore is over: the driver may still be
	// restoring from it after an answer that leaves it in progress.
	if releaseErr := done(ctx, state != controller.ProvisioningInBackground); releaseErr != nil {
		// Still protected: the operation stays until it can let go, and
		// CreateVolume, asked again, answers the same.
		return nil, controller.ProvisioningInBackground, errors.Join(err, releaseErr)
	}
	return pv, state, err
}

// csiClass returns the class to make the claim's volume with: a migrated
// in-tree class translated for this driver (migrated is true), any other
// class as it is.
func (p *Provisioner) csiClass(ctx context.Context, class *storagev1.StorageClass) (_ *storagev1.StorageClass, migrated bool, _ error) {
	if !p.migration.migrates(class) {
		return class, false, nil
	}
	translated, err := p.migration.translateClass(ctx, class, p.cfg.DriverName)
	if err != nil {
		return nil, true, err
	}
	return translated, true, nil
}

// completeRequest adds to the CreateVolume request what createRequest
// leaves out: topology, content source, mutable parameters and the
// provisioner secret. For a restore it returns the VolumeSnapshot to protect
// while CreateVolume restores from it. On error, the state to return.
func (p *Provisioner) completeRequest(ctx context.Context, o controller.ProvisionOptions, req *csi.CreateVolumeRequest, params *classParameters, refs secretRefs) (*sourceSnapshot, controller.ProvisioningState, error) {
	var err error
	if req.AccessibilityRequirements, err = p.topologyRequirements(ctx, o.StorageClass, o.PVC, o.SelectedNodeName); err != nil {
		return nil, topologyState(err), err
	}
	var snapshot *sourceSnapshot
	if req.VolumeContentSource, snapshot, err = p.contentSource(ctx, o.PVC, o.StorageClass.Name); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if req.MutableParameters, err = p.mutableParameters(ctx, o.PVC); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if ref := refs[SecretProvisioner]; ref != nil {
		if req.Secrets, err = p.readSecret(ctx, ref, params.secrets[SecretProvisioner]); err != nil {
			return nil, controller.ProvisioningNoChange, err
		}
	}
	return snapshot, controller.ProvisioningNoChange, nil
}

// create calls CreateVolume with the complete request and returns the PV,
// in its in-tree form for a migrated class.
func (p *Provisioner) create(ctx context.Context, o controller.ProvisionOptions, req *csi.CreateVolumeRequest, fsType string, refs secretRefs, migrated bool) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Calling CreateVolume", "name", req.Name, "parameters", req.Parameters, "capacity", req.CapacityRange)
	rsp, err := p.cfg.Controller.CreateVolume(ctx, req)
	if err != nil {
		return nil, createState(err, o.SelectedNodeName), fmt.Errorf("CSI driver %s: CreateVolume %s: %w", p.cfg.DriverName, req.Name, err)
	}
	vol := rsp.GetVolume()
	if vol.GetVolumeId() == "" {
		// Nothing to delete it by: the driver is broken, say so.
		return nil, controller.ProvisioningFinished, fmt.Errorf("CSI driver %s: CreateVolume %s returned no volume id", p.cfg.DriverName, req.Name)
	}
	if o.RecordAssetID != nil {
		// A restart then deletes this volume by its ID if the claim is gone,
		// instead of creating it again.
		o.RecordAssetID(vol.GetVolumeId())
	}
	if required := req.GetCapacityRange().GetRequiredBytes(); vol.GetCapacityBytes() != 0 && vol.GetCapacityBytes() < required {
		return p.undoCreate(ctx, vol, req, fmt.Errorf("CSI driver %s: CreateVolume %s returned %d bytes, less than the %d requested",
			p.cfg.DriverName, req.Name, vol.GetCapacityBytes(), required))
	}
	pv := p.newVolume(o, vol, fsType, refs)
	if migrated {
		if pv, err = p.migration.toInTree(pv); err != nil {
			return p.undoCreate(ctx, vol, req, err)
		}
	}
	return pv, controller.ProvisioningFinished, nil
}

// createRequest builds the CreateVolume request without topology, content
// source and secrets; it returns the fsType of Filesystem volumes.
func (p *Provisioner) createRequest(o controller.ProvisionOptions, params *classParameters) (*csi.CreateVolumeRequest, string, error) {
	claim := o.PVC
	fsType := ""
	if volumeMode(claim) == corev1.PersistentVolumeFilesystem {
		fsType = params.fsType
		if fsType == "" {
			fsType = p.cfg.DefaultFSType
		}
	}
	caps, err := p.volumeCapabilities(claim, fsType, o.StorageClass.MountOptions)
	if err != nil {
		return nil, "", err
	}
	capacity, err := capacityRange(claim)
	if err != nil {
		return nil, "", err
	}
	return &csi.CreateVolumeRequest{
		Name:               o.PVName,
		CapacityRange:      capacity,
		VolumeCapabilities: caps,
		Parameters:         p.driverParameters(o, params),
	}, fsType, nil
}

// driverParameters are the class's own parameters plus the metadata the
// flags ask for.
func (p *Provisioner) driverParameters(o controller.ProvisionOptions, params *classParameters) map[string]string {
	out := maps.Clone(params.driver)
	if p.cfg.ExtraCreateMetadata {
		out[ParamPVCName] = o.PVC.Name
		out[ParamPVCNamespace] = o.PVC.Namespace
		out[ParamPVName] = o.PVName
	}
	for _, k := range p.cfg.ForwardPVCLabels {
		if v, ok := o.PVC.Labels[k]; ok {
			out[ParamPVCLabelPrefix+k] = v
		}
	}
	for _, k := range p.cfg.ForwardPVCAnnotations {
		if v, ok := o.PVC.Annotations[k]; ok {
			out[ParamPVCAnnotationPrefix+k] = v
		}
	}
	return out
}

// volumeCapabilities gives one capability per access mode of the claim.
func (p *Provisioner) volumeCapabilities(claim *corev1.PersistentVolumeClaim, fsType string, mountOptions []string) ([]*csi.VolumeCapability, error) {
	if len(claim.Spec.AccessModes) == 0 {
		return nil, errors.New("the claim has no access modes: set spec.accessModes")
	}
	var caps []*csi.VolumeCapability
	seen := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range claim.Spec.AccessModes {
		if seen[m] {
			continue
		}
		seen[m] = true
		mode, err := p.accessMode(m)
		if err != nil {
			return nil, err
		}
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
		if volumeMode(claim) == corev1.PersistentVolumeBlock {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
				FsType: fsType, MountFlags: append([]string(nil), mountOptions...),
			}}
		}
		caps = append(caps, c)
	}
	return caps, nil
}

// accessMode maps a Kubernetes access mode to CSI. Drivers that know the
// single-node modes (SINGLE_NODE_MULTI_WRITER capability) get the precise
// ones; others get SINGLE_NODE_WRITER, which they all understand.
func (p *Provisioner) accessMode(m corev1.PersistentVolumeAccessMode) (csi.VolumeCapability_AccessMode_Mode, error) {
	precise := p.cfg.Capabilities.SingleNodeMultiWriter
	switch m {
	case corev1.ReadWriteOnce:
		if precise {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case corev1.ReadWriteOncePod:
		if precise {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case corev1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case corev1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	}
	return 0, fmt.Errorf("access mode %q is not supported", m)
}

// capacityRange is the claim's storage request and, when set, its limit.
func capacityRange(claim *corev1.PersistentVolumeClaim) (*csi.CapacityRange, error) {
	request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	required, err := capacity.Bytes(request)
	if err != nil {
		return nil, fmt.Errorf("the claim's storage request: %w", err)
	}
	r := &csi.CapacityRange{RequiredBytes: required}
	if limit, ok := claim.Spec.Resources.Limits[corev1.ResourceStorage]; ok {
		if r.LimitBytes, err = capacity.Bytes(limit); err != nil {
			return nil, fmt.Errorf("the claim's storage limit: %w", err)
		}
		if r.LimitBytes < required {
			return nil, fmt.Errorf("the claim's storage limit %s is less than its request %s: raise the limit or lower the request", limit.String(), request.String())
		}
	}
	return r, nil
}

// newVolume builds the PV of a created volume.
func (p *Provisioner) newVolume(o controller.ProvisionOptions, vol *csi.Volume, fsType string, refs secretRefs) *corev1.PersistentVolume {
	source := &corev1.CSIPersistentVolumeSource{
		Driver:                     p.cfg.DriverName,
		VolumeHandle:               vol.GetVolumeId(),
		FSType:                     fsType,
		VolumeAttributes:           volumeAttributes(vol.GetVolumeContext(), p.cfg.Identity),
		ControllerPublishSecretRef: refs[SecretControllerPublish],
		NodeStageSecretRef:         refs[SecretNodeStage],
		NodePublishSecretRef:       refs[SecretNodePublish],
		ControllerExpandSecretRef:  refs[SecretControllerExpand],
		NodeExpandSecretRef:        refs[SecretNodeExpand],
		ReadOnly:                   p.cfg.ControllerPublishReadOnly && onlyReadOnlyMany(o.PVC),
	}
	spec := controller.VolumeSpec{
		Source:       corev1.PersistentVolumeSource{CSI: source},
		NodeAffinity: nodeAffinity(vol.GetAccessibleTopology()),
	}
	if b := vol.GetCapacityBytes(); b > 0 {
		spec.Capacity = *resource.NewQuantity(b, resource.BinarySI)
	}
	// Recorded even when empty ("no secret"), as the CSI external-provisioner
	// does, so that it can take the PV back and delete it.
	ref := refs[SecretProvisioner]
	if ref == nil {
		ref = &corev1.SecretReference{}
	}
	spec.Annotations = map[string]string{AnnDeletionSecretName: ref.Name, AnnDeletionSecretNamespace: ref.Namespace}
	// Only when there is one, as upstream.
	if ref := refs[SecretControllerModify]; ref != nil {
		spec.Annotations[AnnModifySecretName], spec.Annotations[AnnModifySecretNamespace] = ref.Name, ref.Namespace
	}
	pv := o.NewVolume(spec)
	// The volume was created with the class's mutable parameters.
	if !p.cfg.IgnoreVolumeAttributesClass {
		pv.Spec.VolumeAttributesClassName = o.PVC.Spec.VolumeAttributesClassName
	}
	return pv
}

// volumeAttributes are the driver's volume context plus the provisioner
// identity.
func volumeAttributes(context map[string]string, identity string) map[string]string {
	out := make(map[string]string, len(context)+1)
	maps.Copy(out, context)
	out[AttrProvisionerIdentity] = identity
	return out
}

// NewIdentity returns an identity for a provisioner instance of the driver
// in the CSI external-provisioner's shape: start time in milliseconds, a
// random number and the driver name.
func NewIdentity(driverName string, start time.Time) string {
	return fmt.Sprintf("%d-%d-%s", start.UnixMilli(), rand.IntN(10000), driverName) //nolint:gosec // tells instances apart, not a secret
}

// onlyReadOnlyMany tells whether ReadOnlyMany is the claim's only access mode.
func onlyReadOnlyMany(claim *corev1.PersistentVolumeClaim) bool {
	modes := claim.Spec.AccessModes
	return len(modes) > 0 && !slices.ContainsFunc(modes, func(m corev1.PersistentVolumeAccessMode) bool { return m != corev1.ReadOnlyMany })
}

// undoCreate deletes a created volume that cannot become a PV, for cause.
// If that fails the volume still exists, so the operation stays in the
// background.
func (p *Provisioner) undoCreate(ctx context.Context, vol *csi.Volume, req *csi.CreateVolumeRequest, cause error) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if err := p.deleteVolume(ctx, vol.GetVolumeId(), req.Secrets); err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; deleting the volume failed: %w", cause, err)
	}
	return nil, controller.ProvisioningFinished, fmt.Errorf("%w; the volume was deleted", cause)
}

// Delete deletes the PV's volume with DeleteVolume, with the provisioner
// secret recorded on the PV. A volume the driver does not know is gone
// already. A PV of the in-tree plugin the driver replaces is deleted by its
// CSI translation; any other PV that is not of this driver is ignored.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	pv, err := p.migration.toCSI(ctx, pv)
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.cfg.DriverName {
		return controller.Ignore("PersistentVolume %s is not a volume of CSI driver %s", pv.Name, p.cfg.DriverName)
	}
	if err := p.checkDetached(ctx, pv); err != nil {
		return err
	}
	// Absent or empty both mean no secret: the CSI external-provisioner
	// writes them empty when the class names none.
	name, namespace := pv.Annotations[AnnDeletionSecretName], pv.Annotations[AnnDeletionSecretNamespace]
	hasName, hasNamespace := name != "", namespace != ""
	var secrets map[string]string
	switch {
	case hasName && hasNamespace:
		var err error
		secrets, err = p.getSecret(ctx, &corev1.SecretReference{Name: name, Namespace: namespace},
			fmt.Sprintf("annotations %s and %s of PersistentVolume %s", AnnDeletionSecretName, AnnDeletionSecretNamespace, pv.Name))
		if err != nil {
			return err
		}
	case hasName || hasNamespace:
		return fmt.Errorf("PersistentVolume %s has a value in only one of the annotations %s and %s: set both, or neither to delete without secrets",
			pv.Name, AnnDeletionSecretName, AnnDeletionSecretNamespace)
	}
	return p.deleteVolume(ctx, pv.Spec.CSI.VolumeHandle, secrets)
}

// DeleteRecordedAsset deletes, by the ID recorded when CreateVolume
// answered, the volume made for a claim that was deleted before its PV was
// saved: DeleteVolume with the provisioner secret the class names for that
// claim, as the PV would have recorded it. No PV ever named the volume, so
// no VolumeAttachment can attach it.
func (p *Provisioner) DeleteRecordedAsset(ctx context.Context, o controller.ProvisionOptions, volumeID string) error {
	if o.StorageClass == nil || o.PVC == nil {
		return errors.New("no StorageClass or claim to delete the volume of")
	}
	params, err := parseParameters(o.StorageClass.Parameters)
	if err != nil {
		return err
	}
	refs, err := params.resolveSecrets(templateValues{pvName: o.PVName, claim: o.PVC})
	if err != nil {
		return err
	}
	var secrets map[string]string
	if ref := refs[SecretProvisioner]; ref != nil {
		if secrets, err = p.readSecret(ctx, ref, params.secrets[SecretProvisioner]); err != nil {
			return err
		}
	}
	return p.deleteVolume(ctx, volumeID, secrets)
}

// checkDetached refuses to delete a volume that a VolumeAttachment still
// attaches to a node: DeleteVolume could destroy data in use, or fail in
// the driver with a less clear message.
func (p *Provisioner) checkDetached(ctx context.Context, pv *corev1.PersistentVolume) error {
	if !cache.WaitForCacheSync(ctx.Done(), p.attachSynced) {
		return fmt.Errorf("waiting for the VolumeAttachment cache before deleting PersistentVolume %s: %w", pv.Name, ctx.Err())
	}
	attached, err := p.attachments.ByIndex(attachedPVIndex, pv.Name)
	if err != nil {
		return err
	}
	for _, obj := range attached {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			return fmt.Errorf("PersistentVolume %s is still attached to node %s (VolumeAttachment %s): its volume is deleted once it is detached",
				pv.Name, va.Spec.NodeName, va.Name)
		}
	}
	return nil
}

// attachedPVIndex indexes VolumeAttachments by the PV they attach, so that
// a deletion looks up its PV's instead of scanning them all.
const attachedPVIndex = "persistentVolumeName"

func attachedPV(obj any) ([]string, error) {
	if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.Source.PersistentVolumeName != nil {
		return []string{*va.Spec.Source.PersistentVolumeName}, nil
	}
	return nil, nil
}

func (p *Provisioner) deleteVolume(ctx context.Context, id string, secrets map[string]string) error {
	_, err := p.cfg.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: secrets})
	if err == nil || isNotFound(err) {
		return nil
	}
	return fmt.Errorf("CSI driver %s: DeleteVolume %s: %w", p.cfg.DriverName, id, err)
}

// readSecret reads the provisioner secret named by the class.
func (p *Provisioner) readSecret(ctx context.Context, ref *corev1.SecretReference, from *secretTemplates) (map[string]string, error) {
	return p.getSecret(ctx, ref, fmt.Sprintf("parameters %q and %q", from.nameKey, from.namespaceKey))
}

// getSecret reads a secret straight from the API server: provisioner
// secrets are few, and caching every secret of the cluster would cost
// memory and a far broader permission. Errors name the secret and where it
// came from, never its content.
func (p *Provisioner) getSecret(ctx context.Context, ref *corev1.SecretReference, from string) (map[string]string, error) {
	secret, err := p.cfg.Client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %s/%s (from %s) does not exist: create it", ref.Namespace, ref.Name, from)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("csi-provisioner may not read secret %s/%s (from %s): grant it get on secrets in namespace %s", ref.Namespace, ref.Name, from, ref.Namespace)
	case err != nil:
		return nil, fmt.Errorf("reading secret %s/%s (from %s): %w", ref.Namespace, ref.Name, from, err)
	}
	out := make(map[string]string, len(secret.Data))
	for k, v := range secret.Data {
		out[k] = string(v)
	}
	return out, nil
}

// warnLegacy logs once per process about each deprecated key in use.
func (p *Provisioner) warnLegacy(ctx context.Context, className string, keys []string) {
	for _, k := range keys {
		if _, seen := p.legacyWarned.LoadOrStore(k, true); seen {
			continue
		}
		klog.FromContext(ctx).Info("StorageClass uses a deprecated parameter; it still works and is passed to the driver unchanged",
			"storageClass", className, "parameter", k, "replacement", currentSpelling(k))
	}
}

// currentSpelling is the csi.storage.k8s.io/ key that replaces a legacy one.
func currentSpelling(legacy string) string {
	if strings.EqualFold(legacy, LegacyParamFSType) {
		return ParamFSType
	}
	for _, k := range secretParameters {
		switch legacy {
		case k.legacyName:
			return k.name
		case k.legacyNamespace:
			return k.namespace
		}
	}
	return ""
}

// HasCapacity asks the driver (GetCapacity) whether it has room now for the
// claim's volume: with the volume capabilities and parameters CreateVolume
// would get, in the selected node's segment, or without one in each segment
// CreateVolume would require (or once without topology). True when one of them has at least the requested
// bytes, or when the claim requests none or the driver cannot tell
// (no GET_CAPACITY capability). An error means the answer is unknown.
func (p *Provisioner) HasCapacity(ctx context.Context, o controller.ProvisionOptions) (bool, error) {
	size := o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() || !p.cfg.Capabilities.GetCapacity {
		return true, nil
	}
	class, _, err := p.csiClass(ctx, o.StorageClass)
	if err != nil {
		return false, err
	}
	o.StorageClass = class
	params, err := parseParameters(o.StorageClass.Parameters)
	if err != nil {
		return false, err
	}
	req, _, err := p.createRequest(o, params)
	if err != nil {
		return false, err
	}
	segments, err := p.capacitySegments(ctx, o)
	if err != nil {
		return false, err
	}
	for _, segment := range segments {
		rsp, err := p.cfg.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{
			VolumeCapabilities: req.VolumeCapabilities, Parameters: req.Parameters, AccessibleTopology: segment,
		})
		if err != nil {
			return false, fmt.Errorf("CSI driver %s: GetCapacity: %w", p.cfg.DriverName, err)
		}
		if size.Value() <= rsp.GetAvailableCapacity() {
			return true, nil
		}
	}
	return false, nil
}

// capacitySegments are the segments HasCapacity asks GetCapacity about:
// with a selected node its own segment (the others' room is no room on it),
// else each segment CreateVolume would require; a single nil segment (no
// topology) when there is none.
func (p *Provisioner) capacitySegments(ctx context.Context, o controller.ProvisionOptions) ([]*csi.Topology, error) {
	noTopology := []*csi.Topology{nil}
	if !p.cfg.Capabilities.Topology || o.SelectedNodeName == "" {
		requirement, err := p.topologyRequirements(ctx, o.StorageClass, o.PVC, o.SelectedNodeName)
		if err != nil {
			return nil, err
		}
		if len(requirement.GetRequisite()) > 0 {
			return requirement.GetRequisite(), nil
		}
		return noTopology, nil
	}
	if err := p.waitForTopologyCaches(ctx); err != nil {
		return nil, err
	}
	keys, segment, err := p.nodeTopology(o.SelectedNodeName)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		return []*csi.Topology{segment}, nil
	}
	return noTopology, nil
}
