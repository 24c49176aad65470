// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/internal/journal"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// syncClaim provisions the claim at key if it needs a volume, and finishes
// operations of earlier claims of that name that are gone.
func (c *ProvisionController) syncClaim(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		// Only this package queues keys: say so rather than retry forever.
		klog.FromContext(ctx).Error(err, "Dropping a malformed claim key", "key", key)
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		claim = nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, op := range c.operations.forClaim(key) {
		if claim == nil || claim.UID != op.entry.Claim.UID || claim.DeletionTimestamp != nil {
			errs = append(errs, c.finishOrphan(ctx, op))
		}
	}
	if claim != nil {
		errs = append(errs, c.provisionClaim(ctx, claim))
	}
	return errors.Join(errs...)
}

// provisionClaim runs one provisioning attempt for a claim that exists.
func (c *ProvisionController) provisionClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if !c.wantsVolume(claim) {
		return nil
	}
	class, err := c.claimClass(ctx, claim)
	if class == nil || err != nil {
		return err
	}
	selectedNode := claim.Annotations[AnnSelectedNode]
	if waitsForNode(class, selectedNode) {
		return nil
	}
	if !c.qualifies(ctx, claim) {
		return nil
	}
	node, err := c.selectedNode(ctx, selectedNode)
	if apierrors.IsNotFound(err) {
		c.claimFailed(claim, class.Name,
			"Selected node %s no longer exists, asking the scheduler for another node", selectedNode)
		return c.dropSelectedNode(ctx, claim)
	}
	if err != nil {
		return err
	}
	pvName := c.cfg.volumeName(claim)
	if _, err := c.volumes.Get(pvName); err == nil || c.saves.get(pvName) != nil || c.saved.has(pvName) {
		return nil
	}
	if !c.canServe(ctx, claim, class.Name) {
		return nil
	}
	return c.provision(ctx, ProvisionOptions{StorageClass: class, PVName: pvName, PVC: claim, SelectedNodeName: selectedNode, SelectedNode: node})
}

// wantsVolume says whether a claim waits for a volume from this controller:
// unbound, not being deleted, of this provisioner, and not given up on.
func (c *ProvisionController) wantsVolume(claim *corev1.PersistentVolumeClaim) bool {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil || !c.claimIsOurs(claim) {
		return false
	}
	return !c.failures.exhausted(claimFailures(claim), claim.ResourceVersion, c.cfg.failedProvisionThreshold)
}

// waitsForNode says whether a claim of a WaitForFirstConsumer class still
// waits for the scheduler to select a node.
func waitsForNode(class *storagev1.StorageClass, selectedNode string) bool {
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer && selectedNode == ""
}

// claimClass returns the claim's StorageClass when this controller serves
// it; nil when it does not, or with the error (a missing class gets its
// Warning event here).
func (c *ProvisionController) claimClass(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	className := ClaimClass(claim)
	class, err := c.classes.Get(className)
	if apierrors.IsNotFound(err) {
		// A class created just before its claim may not be in the cache yet.
		class, err = c.client.StorageV1().StorageClasses().Get(ctx, className, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, c.provisionFailed(ctx, claim, className, fmt.Errorf("StorageClass %q not found: create it or fix spec.storageClassName", className))
	}
	if err != nil || !c.names.Has(class.Provisioner) {
		return nil, err
	}
	return class, nil
}

// canServe says, with a Warning event, what of the claim no volume of this
// provisioner can give: a selector, volumeMode Block, a data source.
func (c *ProvisionController) canServe(ctx context.Context, claim *corev1.PersistentVolumeClaim, className string) bool {
	if claim.Spec.Selector != nil {
		c.claimFailed(claim, className,
			"Claims with spec.selector cannot be dynamically provisioned: remove the selector, or bind the claim to an existing PersistentVolume")
		return false
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		if b, ok := c.provisioner.(BlockProvisioner); !ok || !b.SupportsBlock(ctx) {
			c.claimFailed(claim, className,
				"Provisioner %s does not support volumeMode Block: use volumeMode Filesystem or another StorageClass", c.name)
			return false
		}
	}
	if source := dataSource(claim); source != nil {
		if d, ok := c.provisioner.(DataSourceProvisioner); !ok || !d.SupportsDataSource(ctx, claim) {
			c.refuseDataSource(claim, className, source)
			return false
		}
	}
	return true
}

// provision records the operation, calls Provision and saves its PV.
func (c *ProvisionController) provision(ctx context.Context, options ProvisionOptions) error {
	claim, class, pvName := options.PVC, options.StorageClass, options.PVName
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "pv", pvName)
	ctx = klog.NewContext(ctx, logger)
	entry := journal.Entry{Claim: claim, Class: class, SelectedNode: options.SelectedNodeName}
	// The record must be durable before any asset can exist: it is how a
	// restarted controller finds an asset whose PV was never saved.
	err := c.journal.Record(ctx, pvName, entry)
	c.access.observe(ctx, c.journal.Describe(), err)
	if err != nil {
		return c.recordFailed(ctx, claim, class.Name, err)
	}
	op := c.operations.track(pvName, claimKey(claim), entry, false)
	// Recorded again under this term: whatever another holder did before,
	// what follows is this instance's own operation.
	op.leaseChange = ""
	c.claimEvent(claim, class.Name, corev1.EventTypeNormal, EventProvisioning,
		"External provisioner is provisioning volume for claim %q", claimKey(claim))
	logger.V(2).Info("Provisioning")

	options.RecordAssetID = c.assetRecorder(ctx, pvName)
	pv, state, err := c.callProvision(ctx, options)
	if err == nil {
		return c.saveVolume(ctx, op, options, pv)
	}
	if IsIgnored(err) {
		// Not this instance's claim: it created nothing for it.
		logger.V(2).Info("Provisioner ignored the claim", "reason", err)
		c.endOperation(pvName)
		return nil
	}
	return c.provisionCallFailed(ctx, op, options, state, err)
}

// provisionCallFailed settles a failed Provision: the selected node given
// back to the scheduler, a retry while the asset may still appear, or the
// failure counted against the threshold.
func (c *ProvisionController) provisionCallFailed(ctx context.Context, op *operation, options ProvisionOptions, state ProvisioningState, err error) error {
	claim, className := options.PVC, options.StorageClass.Name
	c.metrics.provisionFailed.WithLabelValues(className, sourceLabel(claim)).Inc()
	c.settle(op, state)
	if state == ProvisioningReschedule && options.SelectedNodeName != "" {
		c.claimFailed(claim, className,
			"Failed to provision volume on node %s, asking the scheduler for another node: %v", options.SelectedNodeName, err)
		return c.dropSelectedNode(ctx, claim)
	}
	if op.inBackground.Load() {
		// The asset may still appear: retry forever, whatever the threshold.
		c.claimFailed(claim, className,
			"Failed to provision volume with StorageClass %q (still in progress, will retry): %v", className, err)
		return err
	}
	return c.provisionFailed(ctx, claim, className, fmt.Errorf("failed to provision volume with StorageClass %q: %w", className, err))
}

// refuseDataSource tells the user why a claim with a data source gets no
// volume: an empty volume in place of their data would look like success.
func (c *ProvisionController) refuseDataSource(claim *corev1.PersistentVolumeClaim, className string, source *corev1.TypedObjectReference) {
	if label := sourceLabel(claim); label == "other" {
		// A volume populator fills such claims through a claim of its own,
		// which has no data source and is provisioned as usual.
		c.claimEvent(claim, className, corev1.EventTypeNormal, EventProvisioning,
			"Waiting for a volume populator to fill the volume from %s %q: provisioner %s does not provision claims with this data source itself",
			source.Kind, source.Name, c.name)
		return
	}
	c.claimFailed(claim, className,
		"Provisioner %s cannot fill a volume from a data source (%s %q) and does not provision an empty one in its place: remove spec.dataSource and spec.dataSourceRef, or use a StorageClass whose provisioner supports %s",
		c.name, source.Kind, source.Name, source.Kind)
}

// recordFailed tells the user why their claim waits when its operation could
// not be recorded in the journal.
func (c *ProvisionController) recordFailed(ctx context.Context, claim *corev1.PersistentVolumeClaim, className string, err error) error {
	switch {
	case errors.Is(err, journal.ErrEntrySize):
		return c.provisionFailed(ctx, claim, className, Permanent(fmt.Errorf("cannot record the claim for provisioning: %w", err)))
	case errors.Is(err, journal.ErrNamespaceFull):
		c.claimFailed(claim, className,
			"Namespace %s has too many claims being provisioned at once; this one waits for them (will retry)", claim.Namespace)
	case errors.Is(err, journal.ErrFull):
		c.claimFailed(claim, className, "%v", err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		c.claimFailed(claim, className, journalForbiddenMessage, c.journal.Describe())
	case gate.Refused(err) != "":
		// The journal's key Secret is not one the provisioner made.
		c.claimFailed(claim, className, "Cannot record the claim for provisioning (will retry): %v", err)
	}
	return err
}

// provisionFailed tells the user and decides between retry and giving up.
func (c *ProvisionController) provisionFailed(ctx context.Context, claim *corev1.PersistentVolumeClaim, className string, err error) error {
	if IsPermanent(err) {
		c.failures.giveUp(claimFailures(claim), claim.ResourceVersion)
		c.claimFailed(claim, className,
			"%v; not retrying: fix the cause, then change the claim (for example add an annotation) or restart the provisioner", err)
		return nil
	}
	if c.failures.record(claimFailures(claim), claim.ResourceVersion, c.cfg.failedProvisionThreshold) {
		c.claimFailed(claim, className,
			"%v; giving up after %d attempts: fix the cause, then change the claim (for example add an annotation) or restart the provisioner to retry",
			err, c.cfg.failedProvisionThreshold)
		klog.FromContext(ctx).Info("Giving up provisioning", "claim", klog.KObj(claim), "err", err)
		return nil
	}
	c.claimFailed(claim, className, "%v", err)
	return err
}

// settle applies a failed attempt's state to the operation: it stays only
// while an asset may exist.
func (c *ProvisionController) settle(op *operation, state ProvisioningState) {
	switch state {
	case ProvisioningInBackground:
		op.inBackground.Store(true)
	case ProvisioningFinished, ProvisioningReschedule:
		op.inBackground.Store(false)
	default:
		// NoChange, and also an empty or unknown state: the safe reading,
		// as in sig-storage-lib-external-provisioner. Taking it for
		// Finished would forget an asset that an earlier attempt left in
		// progress.
	}
	if !op.inBackground.Load() {
		c.endOperation(op.pvName)
	}
}

func (c *ProvisionController) callProvision(ctx context.Context, options ProvisionOptions) (pv *corev1.PersistentVolume, state ProvisioningState, err error) {
	opCtx, cancel := c.operationContext(ctx)
	defer cancel()
	defer c.calls.begin("provision", options.PVC.Namespace+"/"+options.PVC.Name)()
	defer func() {
		if r := recover(); r != nil {
			// It may have panicked after creating the asset: keep calling it
			// until it says what became of it, as for a timeout.
			pv, state, err = nil, ProvisioningInBackground, c.panicked(ctx, "provision", options.PVName, r)
		}
	}()
	pv, state, err = c.provisioner.Provision(opCtx, options)
	if err == nil && pv == nil {
		err, state = errors.New("provisioner returned no PersistentVolume and no error"), ProvisioningFinished
	}
	return pv, state, err
}

// finishOrphan finishes the operation of a claim that is gone. With the ID
// of its asset recorded it deletes that asset; without, Provision is
// idempotent, so calling it again yields the asset, which is then deleted.
// What may be deleted is gate.FinishOrphan's to say: never the asset of a
// class that keeps volumes, whoever held the Lease, and nothing provisioned
// again when the Lease shows that another identity held it since the
// operation was recorded.
func (c *ProvisionController) finishOrphan(ctx context.Context, op *operation) error {
	logger := klog.FromContext(ctx).WithValues("claim", op.claimKey, "pv", op.pvName)
	ctx = klog.NewContext(ctx, logger)
	// A PV that exists is the normal release path's business, never ours.
	exists, err := c.volumeExists(ctx, op.pvName)
	if err != nil {
		return err
	}
	if exists {
		c.endOperation(op.pvName)
		return nil
	}
	class, name := c.orphanClass(op)
	deleter, byID := c.provisioner.(RecordedAssetDeleter)
	byID = byID && op.entry.AssetID != "" && class != nil
	err = gate.FinishOrphan(gate.Orphan{ClaimIncomplete: op.entry.ClaimIncomplete, Recorded: op.entry.Class, Current: class,
		LeaseChange: op.leaseChange, AssetIDRecorded: byID})
	switch {
	case c.leaveRefused(ctx, op, err):
		return nil
	case byID:
		return c.deleteRecordedAsset(ctx, op, deleter, class)
	case class == nil:
		return fmt.Errorf("cannot finish provisioning %s for deleted claim %s: StorageClass %q is gone and was not recorded", op.pvName, op.claimKey, name)
	}
	return c.provisionToDelete(ctx, op, class)
}

// volumeExists says whether the PV of pvName exists, asking the API server.
func (c *ProvisionController) volumeExists(ctx context.Context, pvName string) (bool, error) {
	_, err := c.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err == nil {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// orphanClass returns the class of an operation whose claim is gone: as it
// is now, or else as recorded (nil if neither); and its name.
func (c *ProvisionController) orphanClass(op *operation) (*storagev1.StorageClass, string) {
	class := op.entry.Class
	name := ClaimClass(op.entry.Claim)
	if class != nil {
		name = class.Name
	}
	if current, err := c.classes.Get(name); err == nil {
		class = current
	}
	return class, name
}

// leaveRefused ends, as the gate's refusal says, the operation of a claim
// that is gone when the gate refuses to let it be finished; false when the
// gate did not refuse.
func (c *ProvisionController) leaveRefused(ctx context.Context, op *operation, err error) bool {
	var refusal *gate.Refusal
	if !errors.As(err, &refusal) {
		return false
	}
	switch {
	case refusal.Rule == gate.RuleWholeRecord:
		c.leaveOrphan(ctx, op)
	case refusal.Rule == gate.RuleKeepRetained && op.leaseChange != "":
		c.leaveStale(ctx, op, op.leaseChange+"; "+refusal.Reason)
	default:
		c.leaveStale(ctx, op, refusal.Reason)
	}
	return true
}

// provisionToDelete finishes the operation of a claim that is gone without
// a recorded asset ID: Provision, idempotent, is called again to yield the
// asset, which is then deleted.
func (c *ProvisionController) provisionToDelete(ctx context.Context, op *operation, class *storagev1.StorageClass) error {
	options := ProvisionOptions{StorageClass: class, PVName: op.pvName, PVC: op.entry.Claim, SelectedNodeName: op.entry.SelectedNode,
		RecordAssetID: c.assetRecorder(ctx, op.pvName)}
	if node, err := c.selectedNode(ctx, op.entry.SelectedNode); err == nil {
		options.SelectedNode = node
	}
	why := "no asset ID was recorded"
	if op.entry.Lease == nil {
		why += " and the entry records no Lease term (an earlier version, or no leader election)"
	} else {
		why += " and no other identity held the Lease since"
	}
	klog.FromContext(ctx).Info("Claim is gone; provisioning its volume again to find the asset and delete it", "reason", why)
	pv, state, err := c.callProvision(ctx, options)
	if err != nil {
		if IsIgnored(err) {
			c.endOperation(op.pvName)
			return nil
		}
		c.settle(op, state)
		if op.inBackground.Load() {
			return fmt.Errorf("provisioning for deleted claim %s still in progress: %w", op.claimKey, err)
		}
		return nil
	}
	return c.deleteUnsaved(ctx, op, c.completeVolume(pv, options))
}

// assetRecorder is ProvisionOptions.RecordAssetID for the operation of
// pvName; nil for provisioners that cannot delete by a recorded ID.
func (c *ProvisionController) assetRecorder(ctx context.Context, pvName string) func(string) {
	if _, ok := c.provisioner.(RecordedAssetDeleter); !ok {
		return nil
	}
	return func(id string) {
		logger := klog.FromContext(ctx)
		if id == "" || len(id) > MaxRecordedAssetIDLength {
			logger.Info("Not recording an asset ID: empty or too long", "pv", pvName, "length", len(id))
			return
		}
		if err := c.journal.RecordAsset(pvName, id); err != nil {
			logger.Error(err, "Could not record the asset ID in the in-flight journal; a restart would provision again to find the asset", "pv", pvName)
		}
	}
}

// deleteRecordedAsset finishes the operation of a claim that is gone by
// deleting its asset by the recorded ID: nothing is created again.
func (c *ProvisionController) deleteRecordedAsset(ctx context.Context, op *operation, deleter RecordedAssetDeleter, class *storagev1.StorageClass) error {
	logger := klog.FromContext(ctx)
	why := "its asset ID was recorded"
	if op.leaseChange != "" {
		why += "; " + op.leaseChange
	}
	logger.Info("Claim is gone; deleting the asset by its recorded ID instead of provisioning again", "assetID", op.entry.AssetID, "reason", why)
	options := ProvisionOptions{StorageClass: class, PVName: op.pvName, PVC: op.entry.Claim, SelectedNodeName: op.entry.SelectedNode}
	err := c.guardedDelete(ctx, op.pvName, func(ctx context.Context) error {
		return deleter.DeleteRecordedAsset(ctx, options, op.entry.AssetID)
	})
	if err != nil && !IsIgnored(err) {
		c.claimEvent(op.entry.Claim, class.Name, corev1.EventTypeWarning, EventProvisioningCleanup,
			"Claim was deleted during provisioning and deleting asset %s of volume %s failed (will retry): %v", op.entry.AssetID, op.pvName, err)
		return err
	}
	logger.Info("Deleted the asset of a claim deleted during provisioning", "assetID", op.entry.AssetID)
	c.endOperation(op.pvName)
	return nil
}

// leaveStale ends, without calling the provisioner, the operation of a
// claim that is gone when finishing it could act on storage that another
// provisioner has finished with. The entry stays in the journal for an
// admin, and a Warning event and the log say why and what may be left.
func (c *ProvisionController) leaveStale(ctx context.Context, op *operation, reason string) {
	className := ClaimClass(op.entry.Claim)
	if op.entry.Class != nil {
		className = op.entry.Class.Name
	}
	klog.FromContext(ctx).Error(nil, "Claim is gone and its interrupted provisioning is not finished: no asset is created or deleted on a guess",
		"uid", op.entry.Claim.UID, "assetID", op.entry.AssetID, "reason", reason, "configMap", klog.KRef(c.journal.Namespace(), c.journal.Name()))
	c.claimEvent(op.entry.Claim, className, corev1.EventTypeWarning, EventProvisioningCleanupSkipped,
		"Claim was deleted while provisioning volume %s was interrupted, and its provisioning is not finished: %s. If the backend still holds an asset for volume %s that no PersistentVolume uses, delete it there; then remove key %q from ConfigMap %s/%s",
		op.pvName, reason, op.pvName, op.pvName, c.journal.Namespace(), c.journal.Name())
	c.operations.end(op.pvName)
	c.journal.Keep(op.pvName)
}

// leaveOrphan ends, without calling the provisioner, the operation of a
// deleted claim that the journal recorded without metadata Provision may have
// read: a Provision repeated with that copy may return another asset than
// the one made for the claim (a directory named from an annotation that is
// now missing collapses to its parent), and deleting that would destroy
// other volumes' data. The entry stays in the journal for an admin, and a
// Warning event and the log say which volume's asset may be left.
func (c *ProvisionController) leaveOrphan(ctx context.Context, op *operation) {
	className := ClaimClass(op.entry.Claim)
	if op.entry.Class != nil {
		className = op.entry.Class.Name
	}
	klog.FromContext(ctx).Error(nil, "Claim was deleted while its provisioning was interrupted; not finishing it on a guess: the asset made for this volume may be left",
		"uid", op.entry.Claim.UID, "storageClass", className, "configMap", klog.KRef(c.journal.Namespace(), c.journal.Name()))
	c.claimEvent(op.entry.Claim, className, corev1.EventTypeWarning, EventProvisioningCleanupSkipped,
		"Claim was deleted while provisioning volume %s was interrupted, and provisioner %s does not declare which claim labels and annotations it reads (ClaimMetadataKeys), so it cannot be asked for the same asset again: an asset made for volume %s may be left on the backend. Delete it there, then remove key %q from ConfigMap %s/%s",
		op.pvName, c.name, op.pvName, op.pvName, c.journal.Namespace(), c.journal.Name())
	c.operations.end(op.pvName)
	c.journal.Keep(op.pvName)
}

// deleteUnsaved deletes the asset of a PV that was never saved because its
// claim went away.
func (c *ProvisionController) deleteUnsaved(ctx context.Context, op *operation, pv *corev1.PersistentVolume) error {
	if err := c.callDelete(ctx, pv); err != nil && !IsIgnored(err) {
		c.claimEvent(op.entry.Claim, pv.Spec.StorageClassName, corev1.EventTypeWarning, EventProvisioningCleanup,
			"Claim was deleted during provisioning and deleting volume %s failed (will retry): %v", pv.Name, err)
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleted the asset of a claim deleted during provisioning")
	c.endOperation(op.pvName)
	return nil
}

// completeVolume makes sure the PV names its claim, class and provisioner,
// whatever the provisioner filled in.
func (c *ProvisionController) completeVolume(pv *corev1.PersistentVolume, options ProvisionOptions) *corev1.PersistentVolume {
	pv = pv.DeepCopy()
	// A provisioner may hand back a PV it read from the API (one its helper
	// created); fields the server sets would make the create invalid.
	pv.ResourceVersion, pv.UID, pv.Generation = "", "", 0
	pv.CreationTimestamp, pv.DeletionTimestamp, pv.ManagedFields = metav1.Time{}, nil, nil
	pv.Status = corev1.PersistentVolumeStatus{}
	pv.Name = options.PVName
	pv.Spec.ClaimRef = claimRef(options.PVC)
	if options.StorageClass != nil {
		pv.Spec.StorageClassName = options.StorageClass.Name
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	}
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	// The class's provisioner, one of the controller's names, as
	// kube-controller-manager expects: for an in-tree plugin's name it
	// marks the PV migrated to the CSI driver that serves it.
	pv.Annotations[AnnProvisionedBy] = c.name
	if options.StorageClass != nil && c.names.Has(options.StorageClass.Provisioner) {
		pv.Annotations[AnnProvisionedBy] = options.StorageClass.Provisioner
	}
	if c.cfg.addFinalizer && !slices.Contains(pv.Finalizers, c.cfg.finalizer) {
		pv.Finalizers = append(pv.Finalizers, c.cfg.finalizer)
	}
	return pv
}

// saveVolume saves a provisioned PV, or deletes its asset if the claim went
// away meanwhile. A failed save is retried in the background so the worker
// is free; the journal keeps the operation until the PV is saved.
func (c *ProvisionController) saveVolume(ctx context.Context, op *operation, options ProvisionOptions, pv *corev1.PersistentVolume) error {
	pv = c.completeVolume(pv, options)
	if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete && c.claimGone(ctx, options.PVC) {
		return c.deleteUnsaved(ctx, op, pv)
	}
	err := c.createVolume(ctx, pv)
	if err == nil {
		c.volumeSaved(ctx, op, pv)
		return nil
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		// Saving again cannot help: undo the asset and report the provisioner's bug.
		if derr := c.callDelete(ctx, pv); derr != nil && !IsIgnored(derr) {
			return fmt.Errorf("the API server rejected the PersistentVolume (%w) and deleting its asset failed: %w", err, derr)
		}
		c.endOperation(op.pvName)
		return c.provisionFailed(ctx, options.PVC, pv.Spec.StorageClassName,
			fmt.Errorf("provisioner returned a PersistentVolume the API server rejects (the asset was deleted): %w", err))
	}
	klog.FromContext(ctx).Error(err, "Saving PersistentVolume failed; retrying in the background")
	c.saves.put(pv)
	c.saveQueue.AddRateLimited(pv.Name)
	return nil
}

// createVolume creates pv; an existing PV for the same claim counts as saved.
func (c *ProvisionController) createVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	_, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		if existing.Spec.ClaimRef == nil || existing.Spec.ClaimRef.UID != pv.Spec.ClaimRef.UID {
			return fmt.Errorf("PersistentVolume %s exists and belongs to another claim", pv.Name)
		}
		return nil
	}
	return err
}

func (c *ProvisionController) volumeSaved(ctx context.Context, op *operation, pv *corev1.PersistentVolume) {
	className := pv.Spec.StorageClassName
	claim := op.entry.Claim
	c.metrics.provisionTotal.WithLabelValues(className, sourceLabel(claim)).Inc()
	c.metrics.provisionDuration.WithLabelValues(className, sourceLabel(claim)).Observe(time.Since(op.started).Seconds())
	c.failures.reset(claimFailures(claim))
	c.saved.add(pv.Name)
	c.endOperation(op.pvName)
	c.claimEvent(claim, className, corev1.EventTypeNormal, EventProvisioningSucceeded,
		"Successfully provisioned volume %s", pv.Name)
	klog.FromContext(ctx).V(2).Info("Volume provisioned", "pv", pv.Name)
}

// syncSave retries saving one PV.
func (c *ProvisionController) syncSave(ctx context.Context, pvName string) error {
	pv := c.saves.get(pvName)
	if pv == nil {
		return nil
	}
	if err := c.createVolume(ctx, pv); err != nil {
		return err
	}
	c.saves.remove(pvName)
	if op := c.operations.get(pvName); op != nil {
		c.volumeSaved(ctx, op, pv)
	}
	return nil
}

// claimGone asks the cache and then the API server whether a claim was deleted.
func (c *ProvisionController) claimGone(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool {
	if cached, err := c.claims.PersistentVolumeClaims(claim.Namespace).Get(claim.Name); err == nil && cached.UID == claim.UID && cached.DeletionTimestamp == nil {
		return false
	}
	live, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && (live.UID != claim.UID || live.DeletionTimestamp != nil)
}

// selectedNode returns the named node for a SelectedNodeReader (nil for
// other provisioners and for no name); NotFound when it does not exist.
func (c *ProvisionController) selectedNode(ctx context.Context, name string) (*corev1.Node, error) {
	if c.nodes == nil || name == "" {
		return nil, nil
	}
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		// A node that has just joined may not be in the cache yet.
		node, err = c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	return node, err
}

// qualifies asks the provisioner's Qualifier, if any, whether the claim is
// its to provision; a RetryingQualifier's claim is looked at again after the
// delay it asks for.
func (c *ProvisionController) qualifies(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool {
	switch q := c.provisioner.(type) {
	case RetryingQualifier:
		ok, retryAfter := q.QualifyClaim(ctx, claim)
		if !ok && retryAfter > 0 {
			c.claimQueue.AddAfter(claimKey(claim), retryAfter)
		}
		return ok
	case Qualifier:
		return q.ShouldProvision(ctx, claim)
	}
	return true
}

// dropSelectedNode asks the scheduler to choose another node.
func (c *ProvisionController) dropSelectedNode(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null},"resourceVersion":%q}}`, AnnSelectedNode, claim.ResourceVersion)
	_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: the next event decides again
	}
	return err
}

func (c *ProvisionController) claimIsOurs(claim *corev1.PersistentVolumeClaim) bool {
	if p, ok := claim.Annotations[AnnStorageProvisioner]; ok {
		return c.names.Has(p)
	}
	return c.names.Has(claim.Annotations[AnnBetaStorageProvisioner])
}

func claimKey(claim *corev1.PersistentVolumeClaim) string { return claim.Namespace + "/" + claim.Name }

// ClaimClass returns the claim's StorageClass name, from the field or the
// old beta annotation, which wins as in kube-controller-manager.
func ClaimClass(claim *corev1.PersistentVolumeClaim) string {
	if c, ok := claim.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return c
	}
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return ""
}

// dataSource returns the claim's data source, nil if it has none.
func dataSource(claim *corev1.PersistentVolumeClaim) *corev1.TypedObjectReference {
	if claim.Spec.DataSourceRef != nil {
		return claim.Spec.DataSourceRef
	}
	if s := claim.Spec.DataSource; s != nil {
		return &corev1.TypedObjectReference{APIGroup: s.APIGroup, Kind: s.Kind, Name: s.Name}
	}
	return nil
}

// sourceLabel is the metrics label of the claim's data source: a fixed set,
// since kinds are user input and each value would be a series.
func sourceLabel(claim *corev1.PersistentVolumeClaim) string {
	source := dataSource(claim)
	switch {
	case source == nil:
		return ""
	case source.Kind == "PersistentVolumeClaim" && (source.APIGroup == nil || *source.APIGroup == ""):
		return "PersistentVolumeClaim"
	case source.Kind == "VolumeSnapshot" && source.APIGroup != nil && *source.APIGroup == "snapshot.storage.k8s.io":
		return "VolumeSnapshot"
	}
	return "other"
}
