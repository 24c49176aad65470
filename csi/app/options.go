// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the csi-provisioner command: its flags and how it starts.
package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-base/featuregate"

	"github.com/kubeprov/external-storage/csi/pkg/provisioner"
	"github.com/kubeprov/external-storage/lib/cli"
)

// Defaults of the csi-provisioner flags, those CSI sidecar users know.
const (
	DefaultCSIAddress           = "/run/csi/socket"
	DefaultTimeout              = 10 * time.Second
	DefaultWorkerThreads        = 100
	DefaultVolumeNamePrefix     = "pvc"
	DefaultVolumeNameUUIDLength = -1
	DefaultImmediateTopology    = true
	// DefaultLeaderElectionRetryPeriod is the sidecar's, longer than the
	// other binaries' (cli's): fewer Lease writes per driver.
	DefaultLeaderElectionRetryPeriod   = 5 * time.Second
	DefaultPreventVolumeModeConversion = true
	DefaultCloningProtectionThreads    = 1
	DefaultSnapshotOrphanSweepInterval = 5 * time.Minute
)

// Options are the csi-provisioner flags.
type Options struct {
	cli.Common
	CSIAddress            string
	VolumeNamePrefix      string
	VolumeNameUUIDLength  int
	ExtraCreateMetadata   bool
	DefaultFSType         string
	StrictTopology        bool
	ImmediateTopology     bool
	ForwardPVCLabels      []string
	ForwardPVCAnnotations []string
	Capacity              CapacityOptions
	NodeDeployment        NodeDeploymentOptions

	// FeatureGates are the --feature-gates, every known gate with its
	// value (given or default), filled in by Complete.
	FeatureGates map[string]bool
	// ControllerPublishReadOnly makes PVs of ReadOnlyMany-only claims read-only.
	ControllerPublishReadOnly bool
	// PreventVolumeModeConversion refuses snapshot restores that change the
	// volume mode, unless the VolumeSnapshotContent allows it.
	PreventVolumeModeConversion bool
	// CloningProtectionThreads: workers removing the cloning-protection
	// finalizer from clone sources (csi/pkg/cloneprotection).
	CloningProtectionThreads int
	// AutoMaxProcs is accepted for compatibility and has no effect (see
	// ignoredFlags).
	AutoMaxProcs bool
	// SnapshotOrphanSweepInterval: how often the snapshot protection
	// finalizers no restore needs are removed (also at start); 0 never.
	SnapshotOrphanSweepInterval time.Duration

	featureGate featuregate.MutableVersionedFeatureGate
	// flags is the flag set AddFlags filled, to tell given flags from defaults.
	flags *pflag.FlagSet
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	common := cli.NewCommon("") // the provisioner name is the driver's
	common.Timeout = DefaultTimeout
	common.WorkerThreads = DefaultWorkerThreads
	common.RetryPeriod = DefaultLeaderElectionRetryPeriod
	return &Options{
		Common:               common,
		CSIAddress:           DefaultCSIAddress,
		VolumeNamePrefix:     DefaultVolumeNamePrefix,
		VolumeNameUUIDLength: DefaultVolumeNameUUIDLength,
		ImmediateTopology:    DefaultImmediateTopology,
		Capacity:             newCapacityOptions(),
		NodeDeployment:       newNodeDeploymentOptions(),

		PreventVolumeModeConversion: DefaultPreventVolumeModeConversion,
		CloningProtectionThreads:    DefaultCloningProtectionThreads,
		SnapshotOrphanSweepInterval: DefaultSnapshotOrphanSweepInterval,
		featureGate:                 newFeatureGate(),
	}
}

// FeatureGate implements cli.FeatureGated: --feature-gates also knows the
// logging gates.
func (o *Options) FeatureGate() featuregate.MutableVersionedFeatureGate { return o.featureGate }

// AddFlags adds the shared flags and csi-provisioner's own to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.CSIAddress, "csi-address", o.CSIAddress, "Unix socket of the CSI driver's controller (path, or unix:// URL).")
	fs.StringVar(&o.VolumeNamePrefix, "volume-name-prefix", o.VolumeNamePrefix, "Prefix of PV and volume names: <prefix>-<claim uid>.")
	fs.IntVar(&o.VolumeNameUUIDLength, "volume-name-uuid-length", o.VolumeNameUUIDLength,
		"Characters of the claim uid used in volume names, its dashes removed first (as upstream); -1 uses the whole uid, dashes kept.")
	fs.BoolVar(&o.ExtraCreateMetadata, "extra-create-metadata", o.ExtraCreateMetadata,
		"Pass the claim's name and namespace and the PV's name to CreateVolume as parameters csi.storage.k8s.io/pvc/name, csi.storage.k8s.io/pvc/namespace, csi.storage.k8s.io/pv/name.")
	fs.StringVar(&o.DefaultFSType, "default-fstype", o.DefaultFSType,
		"Filesystem of Filesystem volumes whose StorageClass sets no csi.storage.k8s.io/fstype; empty lets the driver choose.")
	fs.BoolVar(&o.StrictTopology, "strict-topology", o.StrictTopology,
		"For WaitForFirstConsumer volumes, require the selected node's topology only, instead of preferring it.")
	fs.BoolVar(&o.ImmediateTopology, "immediate-topology", o.ImmediateTopology,
		"For Immediate volumes without allowedTopologies, require the topology of the nodes where the driver runs; false lets the driver choose.")
	fs.StringSliceVar(&o.ForwardPVCLabels, "forward-pvc-labels", o.ForwardPVCLabels,
		"Claim labels passed to CreateVolume, each as parameter csi.storage.k8s.io/pvc/labels/<key> (comma-separated keys).")
	fs.StringSliceVar(&o.ForwardPVCAnnotations, "forward-pvc-annotations", o.ForwardPVCAnnotations,
		"Claim annotations passed to CreateVolume, each as parameter csi.storage.k8s.io/pvc/annotations/<key> (comma-separated keys).")
	fs.BoolVar(&o.ControllerPublishReadOnly, "controller-publish-readonly", o.ControllerPublishReadOnly,
		"Make the PVs of claims whose only access mode is ReadOnlyMany read-only (spec.csi.readOnly), so that ControllerPublishVolume attaches them read-only.")
	fs.BoolVar(&o.PreventVolumeModeConversion, "prevent-volume-mode-conversion", o.PreventVolumeModeConversion,
		"Refuse to restore a VolumeSnapshot into a volume of another volumeMode than its source's, unless its VolumeSnapshotContent is annotated "+
			provisioner.AnnAllowVolumeModeChange+": \"true\".")
	fs.IntVar(&o.CloningProtectionThreads, "cloning-protection-threads", o.CloningProtectionThreads,
		"Workers removing the cloning-protection finalizer from clone sources once no clone of them is pending.")
	fs.BoolVar(&o.AutoMaxProcs, "automaxprocs", o.AutoMaxProcs,
		"Accepted for compatibility with external-provisioner; has no effect: Go sets GOMAXPROCS from the container's CPU limit itself.")
	fs.DurationVar(&o.SnapshotOrphanSweepInterval, "snapshot-orphan-sweep-interval", o.SnapshotOrphanSweepInterval,
		"How often to remove the finalizer "+provisioner.SnapshotProtectionFinalizer+" from VolumeSnapshots no restore in flight needs "+
			"(left by a stop at the wrong moment, or by another sidecar); also done at start. 0 disables it.")
	o.featureGate.AddFlag(fs)
	o.Capacity.AddFlags(fs)
	o.NodeDeployment.AddFlags(fs)
	o.flags = fs
}

// Complete fills in FeatureGates.
func (o *Options) Complete() error {
	if err := o.Common.Complete(); err != nil {
		return err
	}
	o.FeatureGates = map[string]bool{}
	for f := range o.featureGate.GetAll() {
		if f != "AllAlpha" && f != "AllBeta" {
			o.FeatureGates[string(f)] = o.featureGate.Enabled(f)
		}
	}
	return nil
}

// Validate checks the flags, naming each one at fault.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate()}
	if o.CSIAddress == "" {
		errs = append(errs, errors.New("--csi-address is required"))
	}
	switch {
	case o.VolumeNamePrefix == "":
		errs = append(errs, errors.New("--volume-name-prefix must not be empty"))
	case strings.HasSuffix(o.VolumeNamePrefix, "-"):
		errs = append(errs, errors.New("--volume-name-prefix must not end with '-': the provisioner adds one"))
	default:
		// The longest name the prefix can make must be a valid PV name.
		if msgs := validation.IsDNS1123Subdomain(o.nameFor(exampleUID)); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--volume-name-prefix %q does not make valid PV names: %s", o.VolumeNamePrefix, strings.Join(msgs, ", ")))
		}
	}
	if o.VolumeNameUUIDLength == 0 || o.VolumeNameUUIDLength < -1 {
		errs = append(errs, fmt.Errorf("--volume-name-uuid-length must be -1 (the whole uid) or more than 0, got %d", o.VolumeNameUUIDLength))
	}
	errs = append(errs, validKeys("--forward-pvc-labels", o.ForwardPVCLabels), validKeys("--forward-pvc-annotations", o.ForwardPVCAnnotations))
	if o.SnapshotOrphanSweepInterval < 0 {
		errs = append(errs, fmt.Errorf("--snapshot-orphan-sweep-interval must not be negative, got %v", o.SnapshotOrphanSweepInterval))
	}
	if o.CloningProtectionThreads < 1 {
		errs = append(errs, fmt.Errorf("--cloning-protection-threads must be at least 1, got %d", o.CloningProtectionThreads))
	}
	errs = append(errs, o.Capacity.Validate())
	errs = append(errs, o.NodeDeployment.Validate())
	return errors.Join(errs...)
}

// exampleUID stands for a claim uid when the name a prefix makes is checked.
const exampleUID = "00000000-0000-0000-0000-000000000000"

// VolumeName is the name of the PV, and of the volume, for a claim:
// <prefix>-<uid>, or with --volume-name-uuid-length the uid without its
// dashes cut to that length, as upstream names them (so that a PV one
// sidecar made is the volume the other would ask for). It depends only on
// the claim's uid, so every retry asks the driver for the same volume.
func (o *Options) VolumeName(claim *corev1.PersistentVolumeClaim) string {
	return o.nameFor(string(claim.UID))
}

func (o *Options) nameFor(uid string) string {
	if o.VolumeNameUUIDLength > 0 {
		uid = strings.ReplaceAll(uid, "-", "")
		// Upstream fails on a length beyond the uid; the whole uid is as close.
		uid = uid[:min(o.VolumeNameUUIDLength, len(uid))]
	}
	return o.VolumeNamePrefix + "-" + uid
}

func validKeys(flag string, keys []string) error {
	var errs []error
	for _, k := range keys {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a valid label or annotation key: %s", flag, k, strings.Join(msgs, ", ")))
		}
	}
	return errors.Join(errs...)
}
