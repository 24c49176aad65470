// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package flex provisions volumes with tools a storage admin already has: an
// executable (a shell script, a vendor CLI) run by the provisioner (the exec
// launcher), or a container image run as a pod per operation (the container
// launcher). Both speak one JSON protocol: the driver gets the Input of a
// claim and answers with an Output naming the volume source.
//
// Everything Delete needs is recorded on the PV (annotations AnnInput and,
// for the container launcher, AnnPod), together with the identity of the
// instance that made it (AnnIdentity): an instance never deletes a volume of
// another identity.
package flex

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
)

// PV annotations written by the provisioner.
const (
	// AnnIdentity is the identity of the instance that provisioned the PV;
	// only that identity deletes it.
	AnnIdentity = "flex.kubeprov.io/identity"
	// AnnLauncher is the launcher (exec or container) that provisioned the PV.
	AnnLauncher = "flex.kubeprov.io/launcher"
	// AnnInput is the provision Input as JSON; delete gets it back. It holds
	// class parameters and claim facts, never secret contents.
	AnnInput = "flex.kubeprov.io/input"
)

// Actions, passed to drivers as their first argument (exec) or FLEX_ACTION
// (container).
const (
	ActionProvision = "provision"
	ActionDelete    = "delete"
)

// Launcher runs a driver for one operation.
type Launcher interface {
	// Name is the --launcher value, recorded on PVs (AnnLauncher).
	Name() string
	// Provision runs the driver for call. An error comes with what may exist
	// (see controller.ProvisioningState).
	Provision(ctx context.Context, call *Call) (*Result, controller.ProvisioningState, error)
	// Delete runs the driver to delete the asset of call.Volume.
	Delete(ctx context.Context, call *Call) error
}

// Call is one driver operation.
type Call struct {
	// PVName is the PV the operation is about.
	PVName string
	// Input is what the driver gets; a launcher may add to it (ConfigMap
	// properties) before the driver runs.
	Input Input
	// Record holds the annotations the PV carries so that Delete can be done
	// later; a launcher adds what it needs. For delete: the PV's annotations.
	Record map[string]string
	// Options is the provisioning request (provision only).
	Options *controller.ProvisionOptions
	// Volume is the PV being deleted (delete only; nil when a failed
	// provision is undone).
	Volume *corev1.PersistentVolume
}

// Annotations returns what the PV must carry: Record plus the Input.
func (c *Call) Annotations() map[string]string {
	ann := maps.Clone(c.Record)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnInput] = c.Input.JSON()
	return ann
}

// Result is a successful provision: either the driver's Output, from which
// the PV is built, or a PV the driver created itself (container launcher),
// already annotated with call.Annotations().
type Result struct {
	Output *Output
	Volume *corev1.PersistentVolume
}

// Options configure a Provisioner.
type Options struct {
	// Name is the provisioner name (StorageClass.provisioner).
	Name string
	// Identity tells this instance's volumes from others'.
	Identity string
	// Launcher runs the driver.
	Launcher Launcher
	// FlexDriver names the FlexVolume driver of FlexVolume sources.
	FlexDriver string
	// Client, when set, validates each PV with a dry-run create before it is
	// returned, so that an invalid driver answer becomes an event instead of
	// a PV the controller can never save.
	Client kubernetes.Interface
}

// Provisioner is the flex controller.Provisioner.
type Provisioner struct {
	opts Options
}

var _ controller.Provisioner = &Provisioner{}

// New returns a Provisioner.
func New(opts Options) (*Provisioner, error) {
	var errs []error
	if opts.Name == "" {
		errs = append(errs, errors.New("provisioner name is required"))
	}
	if opts.Identity == "" {
		errs = append(errs, errors.New("identity is required"))
	}
	if opts.Launcher == nil {
		errs = append(errs, errors.New("launcher is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Provisioner{opts: opts}, nil
}

// Provision runs the driver's provision and returns the PV it describes.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	in, err := NewInput(o)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	call := &Call{
		PVName:  o.PVName,
		Input:   in,
		Options: &o,
		Record: map[string]string{
			AnnIdentity:                 p.opts.Identity,
			AnnLauncher:                 p.opts.Launcher.Name(),
			controller.AnnProvisionedBy: p.opts.Name,
		},
	}
	res, state, err := p.opts.Launcher.Provision(ctx, call)
	if err != nil && isUnknownOutcome(err) {
		return nil, controller.ProvisioningFinished, p.undo(ctx, call, err)
	}
	if err != nil {
		if errors.Is(err, ErrNotSupported) {
			// The driver will say the same until the claim or the driver
			// changes: the controller reports it once and stops retrying.
			err = controller.Permanent(fmt.Errorf("%w: use a StorageClass whose driver supports provisioning, or fix the driver", err))
		}
		return nil, state, err
	}
	if res.Volume != nil {
		return res.Volume, controller.ProvisioningFinished, nil
	}
	pv, err := p.volume(ctx, o, call, res.Output)
	if err != nil {
		// The driver said Success, so an asset may exist.
		return nil, controller.ProvisioningFinished, p.undo(ctx, call, err)
	}
	return pv, controller.ProvisioningFinished, nil
}

// undo runs the driver's delete after a provision whose answer cannot be
// used although an asset may exist. Deleting an asset that does not exist is
// success by the driver contract, so this is always safe.
func (p *Provisioner) undo(ctx context.Context, call *Call, cause error) error {
	if err := p.opts.Launcher.Delete(ctx, call); err != nil {
		return fmt.Errorf("%w; undoing it with the driver's delete failed too, the asset may need to be deleted by hand: %w", cause, err)
	}
	return cause
}

// volume builds and validates the PV of a successful output.
func (p *Provisioner) volume(ctx context.Context, o controller.ProvisionOptions, call *Call, out *Output) (*corev1.PersistentVolume, error) {
	spec, err := out.VolumeSpec(p.opts.FlexDriver, call.Input)
	if err != nil {
		return nil, err
	}
	spec.Annotations = call.Annotations()
	pv := o.NewVolume(spec)
	if p.opts.Client == nil {
		return pv, nil
	}
	_, err = p.opts.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return pv, nil
	case apierrors.IsInvalid(err):
		return nil, fmt.Errorf("driver returned a volume that is not a valid PersistentVolume: %w", err)
	default:
		klog.FromContext(ctx).V(2).Info("Dry-run validation of the PV failed; saving it unchecked", "pv", pv.Name, "err", err)
		return pv, nil
	}
}

// Delete runs the driver's delete with what provision recorded on the PV.
// A PV of another identity is left alone (controller.IgnoredError).
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if err := controller.CheckOwner(pv, AnnIdentity, p.opts.Identity); err != nil {
		return err
	}
	if l := pv.Annotations[AnnLauncher]; l != p.opts.Launcher.Name() {
		return fmt.Errorf("PV %s was provisioned with --launcher=%s but this instance runs --launcher=%s: delete it with a matching instance",
			pv.Name, l, p.opts.Launcher.Name())
	}
	in, err := ParseInput(pv.Annotations[AnnInput])
	if err != nil {
		return fmt.Errorf("PV %s has no valid annotation %s (%w), so the driver cannot be told what to delete: delete the asset by hand, then the PV",
			pv.Name, AnnInput, err)
	}
	// The driver deletes what the input names: an edited annotation must not
	// point it at another volume.
	if name := in[KeyPVName]; name != pv.Name {
		return fmt.Errorf("PV %s: annotation %s names volume %q, not this PV: not deleting; check the PV, delete the asset by hand, then the PV",
			pv.Name, AnnInput, Truncate(name))
	}
	// Options the driver returned (a volume id, say) are what the old flex
	// provisioner passed to delete; recorded input keys win.
	if f := pv.Spec.FlexVolume; f != nil {
		for k, v := range f.Options {
			if _, ok := in[k]; !ok {
				in[k] = v
			}
		}
	}
	return p.opts.Launcher.Delete(ctx, &Call{PVName: pv.Name, Input: in, Record: maps.Clone(pv.Annotations), Volume: pv})
}
