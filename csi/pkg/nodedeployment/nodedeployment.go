// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nodedeployment is distributed provisioning: csi-provisioner runs
// on every node beside the driver (a DaemonSet), and each instance
// provisions the claims of its own node and deletes the volumes of its own
// node, as the upstream sidecar does with --node-deployment.
//
// Which instance serves a claim is decided by the annotation
// volume.kubernetes.io/selected-node:
//   - naming this node: this instance provisions it, whatever the class's
//     volumeBindingMode;
//   - naming another node: another instance's claim, skipped silently;
//   - absent, for a WaitForFirstConsumer class: the scheduler has not chosen
//     yet (the controller does not even ask);
//   - absent, for an Immediate class, with ImmediateBinding: each instance
//     waits (BaseDelay, doubled with each attempt of that instance on that
//     claim up to MaxDelay), then, if its node is in the class's
//     allowedTopologies and the driver reports enough capacity for the claim
//     there (GetCapacity, as CreateVolume would be asked; not asked of a
//     driver without GET_CAPACITY, and an error counts as enough), tries to
//     write its node into the annotation with the
//     claim's resourceVersion as precondition. One write wins; the others
//     fail with a conflict and see the winner's node when the claim comes
//     back through the informer. The winner provisions the claim as a
//     WaitForFirstConsumer one. Without ImmediateBinding such claims are not
//     provisioned by node instances at all.
//
// A volume is deleted by the instance whose node its PV's node affinity
// selects, so that one instance calls DeleteVolume. A PV without node
// affinity is reachable from every node; as upstream, every instance may
// delete it (DeleteVolume is idempotent).
package nodedeployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
	"github.com/kubeprov/external-storage/lib/controller"
)

// forgetAfter is how long the attempts on a claim are remembered after the
// claim was last looked at: a claim that is bound or gone is not looked at
// again, and forgetting a live one only shortens its next delay.
const forgetAfter = 10 * time.Minute

// Config configures a Provisioner.
type Config struct {
	// NodeName is the node this instance runs on (NODE_NAME).
	NodeName string
	// ImmediateBinding lets instances compete for claims of Immediate classes.
	ImmediateBinding bool
	// BaseDelay is the wait before the first attempt on an Immediate claim;
	// it doubles with each further attempt, up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Client writes the selected-node annotation of Immediate claims.
	Client kubernetes.Interface
	// Nodes holds at least this instance's Node: its labels decide
	// allowedTopologies and which PVs are this node's.
	Nodes corelisters.NodeLister
	// Classes holds the StorageClasses.
	Classes storagelisters.StorageClassLister
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Provisioner is the CSI provisioner of one node: a
// controller.RetryingQualifier and controller.DeletionGuard around it.
type Provisioner struct {
	*provisioner.Provisioner
	cfg Config

	mu       sync.Mutex
	attempts map[types.UID]*attempts
}

// attempts is what this instance did for one Immediate claim.
type attempts struct {
	n       int       // attempts to select this node made so far
	due     time.Time // when the next attempt may be made
	touched time.Time // when the claim was last looked at
}

var (
	_ controller.Provisioner           = (*Provisioner)(nil)
	_ controller.RetryingQualifier     = (*Provisioner)(nil)
	_ controller.DeletionGuard         = (*Provisioner)(nil)
	_ controller.BlockProvisioner      = (*Provisioner)(nil)
	_ controller.DataSourceProvisioner = (*Provisioner)(nil)
	_ controller.ClaimMetadataReader   = (*Provisioner)(nil)
	_ controller.RecordedAssetDeleter  = (*Provisioner)(nil)
)

// New wraps p for the node cfg.NodeName.
func New(p *provisioner.Provisioner, cfg Config) (*Provisioner, error) {
	var errs []error
	if p == nil {
		errs = append(errs, errors.New("the CSI provisioner is required"))
	}
	if cfg.NodeName == "" {
		errs = append(errs, errors.New("the node name is required"))
	}
	if cfg.Client == nil || cfg.Nodes == nil || cfg.Classes == nil {
		errs = append(errs, errors.New("the client and the Node and StorageClass listers are required"))
	}
	if cfg.BaseDelay <= 0 || cfg.MaxDelay < cfg.BaseDelay {
		errs = append(errs, fmt.Errorf("need 0 < base delay (%v) <= max delay (%v)", cfg.BaseDelay, cfg.MaxDelay))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provisioner{Provisioner: p, cfg: cfg, attempts: map[types.UID]*attempts{}}, nil
}

// ShouldProvision implements controller.Qualifier.
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool {
	ok, _ := p.QualifyClaim(ctx, claim)
	return ok
}

// QualifyClaim implements controller.RetryingQualifier: a claim whose
// selected node is this one qualifies; an Immediate claim without one is
// competed for after a delay (see the package documentation).
func (p *Provisioner) QualifyClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, time.Duration) {
	switch claim.Annotations[controller.AnnSelectedNode] {
	case p.cfg.NodeName:
		return true, 0
	case "":
	default:
		return false, 0 // another node's
	}
	if !p.cfg.ImmediateBinding {
		return false, 0
	}
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "node", p.cfg.NodeName)
	class, err := p.cfg.Classes.Get(controller.ClaimClass(claim))
	if err != nil {
		// Just created: the controller found it, this cache will soon.
		logger.V(4).Info("StorageClass not in the cache yet", "err", err)
		return false, p.cfg.BaseDelay
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		return false, 0 // the scheduler chooses
	}
	node, err := p.cfg.Nodes.Get(p.cfg.NodeName)
	if err != nil {
		logger.Error(err, "Cannot read this instance's Node; will try the claim again later")
		return false, p.cfg.MaxDelay
	}
	if !allowedOn(node, class.AllowedTopologies) {
		logger.V(4).Info("Node not in the StorageClass's allowedTopologies", "storageClass", class.Name)
		return false, 0
	}

	now := p.cfg.Now()
	wait := p.wait(claim.UID, now)
	if wait > 0 {
		logger.V(4).Info("Waiting before trying to select this node", "delay", wait)
		return false, wait
	}
	// As upstream, only a node with room competes, so that the claim goes
	// to one that can host it; when the driver cannot answer, compete:
	// provisioning then reports the problem on the claim.
	switch fits, err := p.HasCapacity(ctx, controller.ProvisionOptions{StorageClass: class, PVC: claim, SelectedNodeName: p.cfg.NodeName}); {
	case err != nil:
		logger.V(3).Info("Could not ask the driver for this node's capacity; competing for the claim anyway", "err", err)
	case !fits:
		logger.V(4).Info("Not enough capacity on this node for the claim; will look again later")
		return false, p.wait(claim.UID, now)
	}
	won, err := p.selectNode(ctx, claim)
	switch {
	case err != nil:
		logger.Error(err, "Could not select this node for the claim; will try again")
	case won:
		// The claim comes back through the informer with this node.
		logger.V(2).Info("Selected this node for the claim")
	default:
		logger.V(2).Info("Another instance, or another writer, changed the claim first")
	}
	return false, p.wait(claim.UID, now)
}

// wait counts an attempt due at now and returns how long until the next one
// may be made: 0 means now.
func (p *Provisioner) wait(uid types.UID, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, a := range p.attempts {
		if now.Sub(a.touched) > forgetAfter {
			delete(p.attempts, k)
		}
	}
	a := p.attempts[uid]
	if a == nil {
		a = &attempts{due: now.Add(p.delay(0))}
		p.attempts[uid] = a
	}
	a.touched = now
	if d := a.due.Sub(now); d > 0 {
		return d
	}
	a.n++
	a.due = now.Add(p.delay(a.n))
	return 0
}

// delay is the wait before attempt n+1 on a claim (n attempts made):
// BaseDelay doubled n times, at most MaxDelay.
func (p *Provisioner) delay(n int) time.Duration {
	d := p.cfg.BaseDelay
	for range n {
		if d >= p.cfg.MaxDelay/2 {
			return p.cfg.MaxDelay
		}
		d *= 2
	}
	return min(d, p.cfg.MaxDelay)
}

// selectNode writes this node into the claim's selected-node annotation,
// provided nobody changed the claim since the cache saw it. false: somebody
// did (most likely another instance selected its node).
func (p *Provisioner) selectNode(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	// The resourceVersion makes the patch a compare-and-swap: of the
	// instances that try at once, one wins and the others get a conflict.
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%s:%s},"resourceVersion":%s}}`,
		strconv.Quote(controller.AnnSelectedNode), strconv.Quote(p.cfg.NodeName), strconv.Quote(claim.ResourceVersion))
	_, err := p.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("selecting node %s for claim %s/%s: %w", p.cfg.NodeName, claim.Namespace, claim.Name, err)
}

// Provision implements controller.Provisioner: only claims of this node.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName != p.cfg.NodeName {
		return nil, controller.ProvisioningFinished, controller.Ignore("claim selected for node %q, this is node %s", o.SelectedNodeName, p.cfg.NodeName)
	}
	return p.Provisioner.Provision(ctx, o)
}

// ShouldDelete implements controller.DeletionGuard: only volumes of this
// node, those whose PV's node affinity selects it. A PV without node
// affinity is reachable from every node, hence every instance's.
func (p *Provisioner) ShouldDelete(ctx context.Context, pv *corev1.PersistentVolume) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	logger := klog.FromContext(ctx)
	node, err := p.cfg.Nodes.Get(p.cfg.NodeName)
	if err != nil {
		logger.Error(err, "Cannot read this instance's Node; leaving the volume", "pv", klog.KObj(pv))
		return false
	}
	if !selects(pv.Spec.NodeAffinity.Required, node) {
		logger.V(4).Info("Volume of another node", "pv", klog.KObj(pv), "node", p.cfg.NodeName)
		return false
	}
	return true
}

// allowedOn reports whether the node's labels satisfy one of the terms (any
// node when there are none).
func allowedOn(node *corev1.Node, terms []corev1.TopologySelectorTerm) bool {
	if len(terms) == 0 {
		return true
	}
	return slices.ContainsFunc(terms, func(term corev1.TopologySelectorTerm) bool {
		for _, e := range term.MatchLabelExpressions {
			v, ok := node.Labels[e.Key]
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		}
		return true
	})
}

// selects reports whether the node selector (terms ORed, requirements of a
// term ANDed) selects the node, as the scheduler reads a PV's node affinity.
func selects(sel *corev1.NodeSelector, node *corev1.Node) bool {
	return slices.ContainsFunc(sel.NodeSelectorTerms, func(term corev1.NodeSelectorTerm) bool {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			return false // an empty term selects nothing
		}
		for _, r := range term.MatchExpressions {
			v, ok := node.Labels[r.Key]
			if !requirementHolds(r, v, ok) {
				return false
			}
		}
		for _, r := range term.MatchFields {
			if r.Key != "metadata.name" || !requirementHolds(r, node.Name, true) {
				return false
			}
		}
		return true
	})
}

func requirementHolds(r corev1.NodeSelectorRequirement, v string, ok bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}
