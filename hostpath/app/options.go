// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the hostpath-provisioner command: its flags, their
// validation, and the wiring of the provisioner into the shared controller.
package app

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeprov/external-storage/hostpath/pkg/capacity"
	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
	"github.com/kubeprov/external-storage/lib/cli"
)

// Defaults of the hostpath flags.
const (
	DefaultProvisioner = "kubeprov.io/hostpath"
	DefaultPVDir       = "/tmp/hostpath-provisioner"
	// DefaultEnableResizer: the provisioner expands its volumes; a
	// StorageClass's allowVolumeExpansion decides whether claims may ask.
	DefaultEnableResizer = true
)

// Options are the flags of hostpath-provisioner.
type Options struct {
	cli.Common
	PVDir                string
	Config               string
	ConfigReloadInterval time.Duration
	NodeLabelKey         string
	NodeName             string
	DirMode              fs.FileMode
	NodeLocal            bool
	HelperPods           bool
	HelperImage          string
	HelperNamespace      string
	HelperTimeout        time.Duration
	HelperPullPolicy     string
	HelperPodsPerNS      int
	HelperNodeSelector   map[string]string
	HelperTolerations    []string
	EnableResizer        bool
	EnableCapacity       bool
	CapacityPollInterval time.Duration
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	return &Options{
		Common:               cli.NewCommon(DefaultProvisioner),
		PVDir:                DefaultPVDir,
		ConfigReloadInterval: hostpath.DefaultReloadInterval,
		NodeLabelKey:         hostpath.DefaultNodeLabelKey,
		DirMode:              hostpath.DefaultDirMode,
		HelperTimeout:        hostpath.DefaultHelperTimeout,
		HelperPullPolicy:     string(corev1.PullIfNotPresent),
		HelperPodsPerNS:      hostpath.DefaultHelperPodsPerNamespace,
		EnableResizer:        DefaultEnableResizer,
		CapacityPollInterval: capacity.DefaultPollInterval,
	}
}

// AddFlags adds the shared flags and the hostpath ones to fs. Each is also
// read from the environment: --node-name from NODE_NAME, and so on.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.PVDir, "pv-dir", o.PVDir, "Absolute directory on the node under which a directory is created per volume.")
	fs.StringVar(&o.Config, "config", o.Config,
		"config.json in rancher/local-path-provisioner's shape (nodePathMap, sharedFileSystemPath or storageClassConfigs), usually mounted from a ConfigMap; replaces --pv-dir.")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", o.ConfigReloadInterval, "How often --config is read again; an invalid file is logged and the last valid one stays in use.")
	fs.StringVar(&o.NodeLabelKey, "node-label-key", o.NodeLabelKey,
		"Node label the volumes' node affinity uses; with a key other than kubernetes.io/hostname its value is read from the selected Node.")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of the node this instance runs on (required; in a pod, from the downward API spec.nodeName).")
	fs.Var((*octalMode)(&o.DirMode), "dir-mode", "Permission bits of new volume directories, in octal; the default lets pods of any uid write.")
	fs.BoolVar(&o.NodeLocal, "node-local", o.NodeLocal,
		"Run one instance per node (a DaemonSet): serve only claims scheduled to --node-name; needs WaitForFirstConsumer StorageClasses.")
	fs.BoolVar(&o.HelperPods, "helper-pods", o.HelperPods,
		"Make and remove directories through short-lived pods on the target node, so that one instance (a Deployment) serves every node.")
	fs.StringVar(&o.HelperImage, "helper-image", o.HelperImage,
		"Image of helper pods; empty means this pod's own image (read from the pod POD_NAME in POD_NAMESPACE).")
	fs.StringVar(&o.HelperNamespace, "helper-namespace", o.HelperNamespace, "Namespace of helper pods; empty means the provisioner's namespace.")
	fs.DurationVar(&o.HelperTimeout, "helper-timeout", o.HelperTimeout,
		"Bound of one helper pod, from its creation to its end (scheduling, image pull, the work); also its activeDeadlineSeconds.")
	fs.StringVar(&o.HelperPullPolicy, "helper-image-pull-policy", o.HelperPullPolicy, "imagePullPolicy of helper pods: Always, IfNotPresent or Never.")
	fs.IntVar(&o.HelperPodsPerNS, "helper-pods-per-namespace", o.HelperPodsPerNS,
		"Most helper pods that exist at once for the claims of one namespace; more wait (Warning event), so that no namespace holds every node's helper capacity.")
	fs.StringToStringVar(&o.HelperNodeSelector, "helper-node-selector", o.HelperNodeSelector,
		"nodeSelector of helper pods (key=value,...): a claim whose selected node lacks these labels gets a Warning event and no pod.")
	fs.StringArrayVar(&o.HelperTolerations, "helper-toleration", o.HelperTolerations,
		"A taint helper pods tolerate, as KEY[=VALUE][:EFFECT] (repeat the flag for more); none by default: a node with a NoSchedule or NoExecute taint not listed (control-plane nodes) gets no helper pod.")
	fs.BoolVar(&o.EnableResizer, "enable-resizer", o.EnableResizer,
		"Expand the volumes of bound claims whose request grows (StorageClasses with allowVolumeExpansion: true), as the external resizer kube-controller-manager waits for; with leader election only the leader resizes.")
	fs.BoolVar(&o.EnableCapacity, "enable-capacity", o.EnableCapacity,
		"Publish the room left on each node as CSIStorageCapacity objects (per WaitForFirstConsumer StorageClass and node), so that kube-scheduler avoids full nodes; needs a --provisioner that is a DNS subdomain and a CSIDriver of that name with storageCapacity: true.")
	fs.DurationVar(&o.CapacityPollInterval, "capacity-poll-interval", o.CapacityPollInterval,
		"How often every CSIStorageCapacity object is refreshed with --enable-capacity; a volume created or deleted refreshes its node's at once.")
}

// Validate checks the flags, naming the flag at fault.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate()}
	if o.ConfigReloadInterval <= 0 {
		errs = append(errs, fmt.Errorf("--config-reload-interval must be positive, got %s", o.ConfigReloadInterval))
	}
	if o.NodeLabelKey == "" {
		errs = append(errs, errors.New("--node-label-key must not be empty"))
	}
	if o.Config != "" {
		if _, _, err := hostpath.LoadConfig(o.Config, o.HelperPods); err != nil {
			errs = append(errs, fmt.Errorf("--config: %w", err))
		}
	} else if !filepath.IsAbs(o.PVDir) {
		errs = append(errs, fmt.Errorf("--pv-dir must be an absolute path, got %q", o.PVDir))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name (or NODE_NAME) is required: the name of the node whose --pv-dir this instance manages"))
	}
	if o.NodeLocal && o.LeaderElection {
		errs = append(errs, errors.New("--leader-election cannot be combined with --node-local: every node's instance must be active"))
	}
	if o.HelperPods {
		errs = append(errs, o.validateHelperPods()...)
	}
	if o.EnableCapacity {
		errs = append(errs, o.validateCapacity()...)
	}
	return errors.Join(errs...)
}

// validateCapacity checks the flags that matter with --enable-capacity.
// kube-scheduler looks up the CSIDriver named by a class's provisioner,
// and CSIDriver names are DNS subdomains.
func (o *Options) validateCapacity() []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.Provisioner); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--enable-capacity needs a --provisioner that can name a CSIDriver object (a DNS subdomain such as hostpath.example.com), got %q: %s; "+
			"set --provisioner (and the StorageClasses' provisioner) to such a name, or drop --enable-capacity", o.Provisioner, strings.Join(msgs, "; ")))
	}
	if o.CapacityPollInterval <= 0 {
		errs = append(errs, fmt.Errorf("--capacity-poll-interval must be positive, got %s", o.CapacityPollInterval))
	}
	return errs
}

// validateHelperPods checks the flags that matter with --helper-pods.
func (o *Options) validateHelperPods() []error {
	var errs []error
	if o.NodeLocal {
		errs = append(errs, errors.New("--helper-pods cannot be combined with --node-local: helper pods serve every node from one instance"))
	}
	if o.HelperTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--helper-timeout must be at least 1s, got %s", o.HelperTimeout))
	}
	if o.HelperPodsPerNS < 1 {
		errs = append(errs, fmt.Errorf("--helper-pods-per-namespace must be at least 1, got %d", o.HelperPodsPerNS))
	}
	if tolerations, err := o.helperTolerations(); err != nil {
		errs = append(errs, err)
	} else if err := hostpath.ValidateHelperPlacement(o.HelperNodeSelector, tolerations); err != nil {
		errs = append(errs, fmt.Errorf("--helper-node-selector: %w", err))
	}
	switch corev1.PullPolicy(o.HelperPullPolicy) {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("--helper-image-pull-policy %q must be Always, IfNotPresent or Never", o.HelperPullPolicy))
	}
	return errs
}

// helperTolerations parses --helper-toleration.
func (o *Options) helperTolerations() ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	var errs []error
	for _, s := range o.HelperTolerations {
		t, err := hostpath.ParseToleration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--helper-toleration: %w", err))
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// octalMode is a pflag.Value for permission bits written in octal ("0750").
type octalMode fs.FileMode

func (m *octalMode) String() string { return fmt.Sprintf("%#o", uint32(*m)) }

func (m *octalMode) Type() string { return "octal" }

func (m *octalMode) Set(s string) error {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return fmt.Errorf("%q is not an octal number", s)
	}
	if v > uint64(fs.ModePerm) {
		return fmt.Errorf("%s: only permission bits (0000 to 0777) are allowed", s)
	}
	*m = octalMode(v)
	return nil
}
