// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostpath is a complete dynamic provisioner in one small file, and
// the one to copy when writing your own: each volume is a directory on one
// node, <dir>/<pv-name>, served to pods as a hostPath volume pinned to that
// node.
//
// It shows everything the controller expects from a provisioner:
//
//   - Provision is idempotent per PV name and builds its PV with
//     ProvisionOptions.NewVolume, so only the volume source, node affinity and
//     an identity annotation are its own work.
//   - Errors are sentences a user can act on: the controller puts them in a
//     ProvisioningFailed or VolumeFailedDelete event.
//   - Delete treats a missing asset as success, and answers an IgnoredError
//     for volumes another instance owns.
//   - Qualifier keeps each instance of a DaemonSet to its own node's claims.
//
// It sets no size limit: the capacity on the PV is the claim's request, and a
// pod can write more than that.
package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
)

// AnnNode is the PV annotation naming the node whose directory backs the
// volume. It is the provisioner's identity: an instance deletes only the
// volumes of its own node.
const AnnNode = "hostpath.kubeprov.io/node"

// DefaultDirMode lets a pod running as any user write to its volume, as
// pods of unrelated images (with unrelated uids) share one provisioner.
const DefaultDirMode fs.FileMode = 0o777

// Config is what an instance needs to know about its node.
type Config struct {
	// Dir is the absolute path under which volume directories are created.
	Dir string
	// Node is the name of the node Dir is on. Volumes are pinned to it by
	// its kubernetes.io/hostname label, which equals the node name on most
	// clusters (kubeadm, kind, k3s).
	Node string
	// DirMode is the permission bits of new volume directories, applied
	// whatever the process umask.
	DirMode fs.FileMode
	// NodeLocal is true when one instance runs on every node (a DaemonSet):
	// each then serves only the claims the scheduler placed on its node.
	NodeLocal bool
}

// Provisioner creates and deletes volume directories on one node.
type Provisioner struct {
	cfg Config
}

// The interfaces the controller looks for.
var (
	_ controller.Provisioner = (*Provisioner)(nil)
	_ controller.Qualifier   = (*Provisioner)(nil)
)

// New checks cfg and returns a Provisioner.
func New(cfg Config) (*Provisioner, error) {
	var errs []error
	if !filepath.IsAbs(cfg.Dir) {
		errs = append(errs, fmt.Errorf("volume directory %q must be an absolute path", cfg.Dir))
	}
	if cfg.Node == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if cfg.DirMode&^fs.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("directory mode %#o has bits other than permissions", uint32(cfg.DirMode)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.Dir = filepath.Clean(cfg.Dir)
	return &Provisioner{cfg: cfg}, nil
}

// ShouldProvision tells the controller which claims are this instance's.
// A claim's selected node is set by the scheduler for WaitForFirstConsumer
// classes; claims of Immediate classes have none. A node-local instance
// must skip those: every node's instance would otherwise create a directory
// for the same claim, and all but one would leak.
func (p *Provisioner) ShouldProvision(_ context.Context, claim *corev1.PersistentVolumeClaim) bool {
	node, selected := claim.Annotations[controller.AnnSelectedNode]
	if !selected {
		return !p.cfg.NodeLocal
	}
	return node == p.cfg.Node
}

// Provision creates the claim's directory and returns its PV.
func (p *Provisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	// The controller also calls Provision to finish an operation whose claim
	// is gone, without asking ShouldProvision first.
	if o.SelectedNodeName != "" && o.SelectedNodeName != p.cfg.Node {
		return nil, controller.ProvisioningNoChange, controller.Ignore("claim is for node %s, this instance serves node %s", o.SelectedNodeName, p.cfg.Node)
	}
	// Reject what a directory on one node cannot honor before creating
	// anything, so that nothing has to be undone.
	if err := check(o); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	path, err := p.volumePath(o.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := p.makeDir(path); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: path,
			// Directory, not DirectoryOrCreate: should the directory vanish,
			// the pod fails to start instead of silently getting an empty one.
			Type: ptr.To(corev1.HostPathDirectory),
		}},
		NodeAffinity: controller.NodeAffinityForHostname(p.cfg.Node),
		Annotations:  map[string]string{AnnNode: p.cfg.Node},
	}), controller.ProvisioningFinished, nil
}

// check rejects what a directory on one node cannot serve. Block claims
// never get here: the controller rejects them itself because this
// provisioner does not implement controller.BlockProvisioner.
func check(o controller.ProvisionOptions) error {
	if class := o.StorageClass; class != nil {
		if err := controller.CheckParameters(class); err != nil {
			return fmt.Errorf("StorageClass %s: %w; remove them", class.Name, err)
		}
		if len(class.MountOptions) > 0 {
			return fmt.Errorf("StorageClass %s: mountOptions are not supported: hostPath volumes are not mounted; remove them", class.Name)
		}
	}
	// Claims with a data source never get here either: the controller
	// refuses them for provisioners that are no DataSourceProvisioner.
	if err := controller.CheckAccessModes(o.PVC, corev1.ReadWriteOnce, corev1.ReadWriteOncePod); err != nil {
		return fmt.Errorf("%w: a hostPath volume lives on a single node; recreate the claim", err)
	}
	return nil
}

// makeDir creates the volume directory with the configured mode. An existing
// directory is success: Provision may be called again for the same PV.
func (p *Provisioner) makeDir(path string) error {
	err := os.Mkdir(path, 0o700)
	if errors.Is(err, fs.ErrExist) {
		// Lstat, not Stat: a symlink planted here must not become a volume.
		fi, lerr := os.Lstat(path)
		if lerr != nil {
			return lerr
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory: remove it from the node", path)
		}
	} else if err != nil {
		return fmt.Errorf("creating volume directory (check --pv-dir on node %s): %w", p.cfg.Node, err)
	}
	// Mkdir's mode is filtered by the umask; Chmod is not.
	if err := os.Chmod(path, p.cfg.DirMode); err != nil {
		return fmt.Errorf("setting the mode of volume directory %s: %w", path, err)
	}
	return nil
}

// Delete removes the directory of a released volume of this node.
func (p *Provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if node := pv.Annotations[AnnNode]; node != p.cfg.Node {
		return controller.Ignore("volume %s is on node %q, this instance serves node %s", pv.Name, node, p.cfg.Node)
	}
	path, err := p.volumePath(pv.Name)
	if err != nil {
		return err
	}
	// The PV object can be edited; the directory removed is only ever the
	// one this provisioner made for it.
	if pv.Spec.HostPath == nil || filepath.Clean(pv.Spec.HostPath.Path) != path {
		return fmt.Errorf("refusing to delete: the volume's hostPath is %s, not %s; remove the data yourself, then delete the PersistentVolume", hostPathOf(pv), path)
	}
	// RemoveAll never follows symlinks: if path is a link, only the link
	// goes, never its target. A missing directory is success.
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("removing volume directory on node %s: %w", p.cfg.Node, err)
	}
	return nil
}

// volumePath is the directory of a PV. Kubernetes object names cannot
// contain "/", but the path is where files get deleted, so check anyway.
func (p *Provisioner) volumePath(pvName string) (string, error) {
	if pvName == "" || pvName == "." || pvName == ".." || pvName != filepath.Base(pvName) {
		return "", fmt.Errorf("volume name %q is not a plain file name", pvName)
	}
	return filepath.Join(p.cfg.Dir, pvName), nil
}

func hostPathOf(pv *corev1.PersistentVolume) string {
	if pv.Spec.HostPath == nil {
		return "not set"
	}
	return fmt.Sprintf("%q", pv.Spec.HostPath.Path)
}
