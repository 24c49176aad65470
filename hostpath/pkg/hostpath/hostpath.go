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
// Beyond the minimum it speaks rancher/local-path-provisioner's language: a
// config.json with a nodePathMap (several paths per node, the one with the
// most free space wins) or a sharedFileSystemPath (RWX, no node affinity),
// or either per StorageClass (storageClassConfigs), volumeType hostPath or
// local, pathPattern in either spelling, and helper pods that make the
// directories on other nodes (helper.go).
//
// Each node path has a budget (budget.go): a claim goes to the path with
// the most room left, and one that fits nowhere goes back to the
// scheduler. Sizes are accounted, not enforced: a pod can write more than
// its claim's request.
package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/pathpattern"
)

// AnnNode is the PV annotation naming the node whose directory backs the
// volume. It is the provisioner's identity: an instance deletes only the
// volumes of its own node.
const AnnNode = "hostpath.kubeprov.io/node"

// AnnDir is the PV annotation holding the volume's directory relative to its
// path, when a pathPattern named it (without it, the directory is the PV's
// name). Delete removes nothing else.
const AnnDir = "hostpath.kubeprov.io/dir"

// AnnShared marks volumes on the sharedFileSystemPath: they have no node,
// and any instance that is not --node-local may delete them.
const AnnShared = "hostpath.kubeprov.io/shared"

// Class parameters and annotations, named as rancher/local-path-provisioner
// names them.
const (
	// KeyVolumeType is the class parameter, and the claim annotation, that
	// chooses between hostPath and local volumes; the claim's wins.
	KeyVolumeType = "volumeType"
	// AnnDefaultVolumeType is local-path's StorageClass annotation for the
	// same choice; the parameter wins over it.
	AnnDefaultVolumeType = "defaultVolumeType"
	// KeyNodePath chooses one of the node's paths instead of the one with
	// the most free space.
	KeyNodePath = "nodePath"
	// KeyPathPattern names each volume's directory (lib/pathpattern), in
	// its ${.PVC.name} or local-path's {{ .PVC.Name }} spelling.
	KeyPathPattern = pathpattern.Key
	// KeyAllowUnsafePathPattern ("true"), a class parameter or annotation,
	// lifts local-path's rule that a Go-template pathPattern names a
	// directory under <namespace>/<claim>/. The rules every pattern obeys
	// stay: a plain relative path, no other volume's directory, no link.
	KeyAllowUnsafePathPattern = "allowUnsafePathPattern"
	// KeyNodeAffinityKey is local-path's per-class node label of the node
	// affinity; here it must be --node-label-key, which is every class's.
	KeyNodeAffinityKey = "nodeAffinityKey"
)

// localPathScriptKeys are local-path's class parameters and annotations
// that only feed its setup script (VOL_USER, VOL_GROUP, VOL_PERM), which
// hostpath-provisioner does not run.
var localPathScriptKeys = []string{"userPattern", "groupPattern", "permPattern"}

// Volume types.
const (
	VolumeTypeHostPath = "hostPath"
	VolumeTypeLocal    = "local"
)

// DefaultDirMode lets a pod running as any user write to its volume, as
// pods of unrelated images (with unrelated uids) share one provisioner.
const DefaultDirMode fs.FileMode = 0o777

// DefaultNodeLabelKey is the node label volumes are pinned to.
const DefaultNodeLabelKey = corev1.LabelHostname

// Config is what an instance needs to know about its nodes.
type Config struct {
	// Dir is the absolute path under which volume directories are created on
	// every node: the simple case, when ConfigFile is empty.
	Dir string
	// ConfigFile is a config.json (nodePathMap, sharedFileSystemPath or
	// storageClassConfigs), read again every ReloadInterval. It replaces
	// Dir.
	ConfigFile string
	// ReloadInterval is how often ConfigFile is read again; zero means
	// DefaultReloadInterval.
	ReloadInterval time.Duration
	// Node is the name of the node this instance runs on.
	Node string
	// NodeLabelKey is the node label the volumes' node affinity uses; empty
	// means DefaultNodeLabelKey, whose value is taken to be the node name
	// (kubeadm, kind, k3s). With another key the label's value is read
	// from the selected Node.
	NodeLabelKey string
	// DirMode is the permission bits of new volume directories, applied
	// whatever the process umask.
	DirMode fs.FileMode
	// NodeLocal is true when one instance runs on every node (a DaemonSet):
	// each then serves only the claims the scheduler placed on its node.
	NodeLocal bool
	// Dirs makes and removes directories; nil means LocalDirs, on this
	// instance's node only. Helper pods (NewHelperDirs) serve every node.
	Dirs Dirs
	// Volumes, if set, lists the PVs (cached as KeepVolume keeps them), so
	// that no volume's directory is another's, or inside or above it,
	// whatever modes the directories have.
	Volumes corelisters.PersistentVolumeLister
}

// Provisioner creates and deletes volume directories on nodes.
type Provisioner struct {
	cfg       Config
	paths     atomic.Pointer[PathMap]
	rawConfig []byte
	anyNode   bool
	// inUse holds the directories of provisions under way and of volumes
	// whose PVs may not be in the Volumes cache yet, by node.
	inUse pathpattern.InUse
	// ledger holds the room of the same volumes, against the budgets.
	ledger ledger
}

// The interfaces the controller looks for.
var (
	_ controller.Provisioner         = (*Provisioner)(nil)
	_ controller.Qualifier           = (*Provisioner)(nil)
	_ controller.ClaimMetadataReader = (*Provisioner)(nil)
	_ controller.SelectedNodeReader  = (*Provisioner)(nil)
)

// New checks cfg and returns a Provisioner.
func New(cfg Config) (*Provisioner, error) {
	var errs []error
	if cfg.ConfigFile == "" && !filepath.IsAbs(cfg.Dir) {
		errs = append(errs, fmt.Errorf("volume directory %q must be an absolute path", cfg.Dir))
	}
	if cfg.Node == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if cfg.DirMode&^fs.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("directory mode %#o has bits other than permissions", uint32(cfg.DirMode)))
	}
	p := &Provisioner{}
	if cfg.ConfigFile != "" {
		_, local := cfg.Dirs.(LocalDirs)
		m, raw, err := LoadConfig(cfg.ConfigFile, cfg.Dirs != nil && !local)
		if err != nil {
			errs = append(errs, err)
		}
		p.paths.Store(m)
		p.rawConfig = raw
	} else {
		p.paths.Store(SinglePath(cfg.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	if cfg.NodeLabelKey == "" {
		cfg.NodeLabelKey = DefaultNodeLabelKey
	}
	if cfg.Dirs == nil {
		cfg.Dirs = LocalDirs{}
	} else {
		_, local := cfg.Dirs.(LocalDirs)
		p.anyNode = !local
	}
	p.cfg = cfg
	return p, nil
}

// Paths returns the configuration in use.
func (p *Provisioner) Paths() *PathMap { return p.paths.Load() }

// ReadsSelectedNode implements controller.SelectedNodeReader: the value of
// a node label other than the hostname is read from the Node.
func (p *Provisioner) ReadsSelectedNode() bool { return p.cfg.NodeLabelKey != DefaultNodeLabelKey }

// ClaimMetadataKeys implements controller.ClaimMetadataReader: the claim's
// volumeType annotation and what the class's pathPattern reads.
func (p *Provisioner) ClaimMetadataKeys(class *storagev1.StorageClass) (labels, annotations []string) {
	if class != nil {
		labels, annotations = pathpattern.MetadataKeys(class.Parameters[KeyPathPattern])
	}
	return labels, append(annotations, KeyVolumeType)
}

// ShouldProvision tells the controller which claims are this instance's.
// A claim's selected node is set by the scheduler for WaitForFirstConsumer
// classes; claims of Immediate classes have none. A node-local instance
// must skip those: every node's instance would otherwise create a directory
// for the same claim, and all but one would leak. An instance that is not
// node-local serves every node when the path is shared or helper pods make
// the directories.
func (p *Provisioner) ShouldProvision(_ context.Context, claim *corev1.PersistentVolumeClaim) bool {
	node, selected := claim.Annotations[controller.AnnSelectedNode]
	if !selected {
		return !p.cfg.NodeLocal
	}
	// A class the configuration lacks is reported by Provision.
	paths, err := p.Paths().ForClass(controller.ClaimClass(claim))
	return p.servesEveryNode(err == nil && paths.Shared != "") || node == p.cfg.Node
}

// Provision creates the claim's directory and returns its PV.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	var className string
	if o.StorageClass != nil {
		className = o.StorageClass.Name
	}
	paths, err := p.Paths().ForClass(className)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	node := o.SelectedNodeName
	if node == "" {
		node = p.cfg.Node
	}
	// The controller also calls Provision to finish an operation whose claim
	// is gone, without asking ShouldProvision first.
	if node != p.cfg.Node && !p.servesEveryNode(paths.Shared != "") {
		return nil, controller.ProvisioningNoChange, controller.Ignore("claim is for node %s, this instance serves node %s", node, p.cfg.Node)
	}
	// Reject what the volume cannot honor before creating anything, so
	// that nothing has to be undone.
	vp, err := p.parse(o, paths)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	roots, state, err := volumeRoots(o, paths, node, vp.nodePath)
	if err != nil {
		return nil, state, err
	}
	var value string
	if paths.Shared == "" {
		if value, err = p.nodeLabelValue(o, node); err != nil {
			return nil, controller.ProvisioningFinished, err
		}
	}
	if roots, state, err = p.placeInBudget(o, paths, node, roots); err != nil {
		return nil, state, err
	}
	path, state, err := p.createDir(ctx, o, paths, node, roots, vp)
	if err != nil {
		return nil, state, err
	}
	return o.NewVolume(p.volumeSpec(vp, node, value, path, paths.Shared != "")), controller.ProvisioningFinished, nil
}

// servesEveryNode says whether this instance makes the volumes of every
// node's claims, not only its own node's: when it is not node-local, and
// helper pods make the directories or the path (shared) is on every node.
func (p *Provisioner) servesEveryNode(shared bool) bool {
	return !p.cfg.NodeLocal && (p.anyNode || shared)
}

// volumeRoots are the paths of node the volume may go under: those the
// configuration gives the node, or only the class's nodePath, which must be
// one of them. A node listed with no paths sends a claim the scheduler
// placed there back to the scheduler.
func volumeRoots(o controller.ProvisionOptions, paths *PathMap, node, nodePath string) ([]string, controller.ProvisioningState, error) {
	roots, ok := paths.PathsFor(node)
	if !ok {
		err := fmt.Errorf("node %s takes no volumes: the configuration lists it with no paths; the claim goes back to the scheduler", node)
		if o.SelectedNodeName != "" {
			return nil, controller.ProvisioningReschedule, err
		}
		return nil, controller.ProvisioningFinished, err
	}
	if nodePath == "" {
		return roots, controller.ProvisioningFinished, nil
	}
	if !containsPath(roots, nodePath) {
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %s parameter %s %s is not a path of node %s in the configuration (%v)",
			o.StorageClass.Name, KeyNodePath, nodePath, node, roots)
	}
	return []string{filepath.Clean(nodePath)}, controller.ProvisioningFinished, nil
}

// placeInBudget narrows roots to where the claim's request fits the
// budgets (placeVolume) and holds its room there. A claim that fits
// nowhere on the node the scheduler selected goes back to the scheduler,
// which may find a node with room.
func (p *Provisioner) placeInBudget(o controller.ProvisionOptions, paths *PathMap, node string, roots []string) ([]string, controller.ProvisioningState, error) {
	scope, _ := volumeScope(node, paths.Shared != "")
	size := o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	roots, err := p.placeVolume(paths, node, scope, roots, o.PVName, size.Value())
	switch {
	case err == nil:
		return roots, controller.ProvisioningFinished, nil
	case errors.Is(err, ErrNoRoom) && o.SelectedNodeName != "" && paths.Shared == "":
		return nil, controller.ProvisioningReschedule, fmt.Errorf("%w; the claim goes back to the scheduler", err)
	}
	return nil, controller.ProvisioningFinished, err
}

// createDir reserves the volume's directory under every root, so that no
// other volume takes it meanwhile, has Dirs make it under one of them, and
// keeps only that one's reservation; it returns the directory's path.
func (p *Provisioner) createDir(ctx context.Context, o controller.ProvisionOptions, paths *PathMap, node string, roots []string, vp volumeParams) (string, controller.ProvisioningState, error) {
	scope, where := volumeScope(node, paths.Shared != "")
	candidates, err := p.reserve(scope, where, roots, vp.rel, o.PVName)
	if err != nil {
		p.settleHold(scope, o.PVName, "")
		return "", controller.ProvisioningFinished, err
	}
	size := o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	root, err := p.cfg.Dirs.Create(ctx, CreateRequest{
		Node: node, PV: o.PVName, Namespace: o.PVC.Namespace, Roots: roots, Rel: vp.rel, Mode: p.cfg.DirMode, SizeBytes: size.Value(), MustBeEmpty: mustBeEmpty(vp),
		Scripts: paths.Scripts, Enforce: paths.Enforce,
	})
	path := filepath.Join(root, vp.rel)
	for _, c := range candidates {
		if err != nil || c != path {
			p.inUse.Release(scope, c, o.PVName)
		}
	}
	if err != nil {
		root = ""
	}
	p.settleHold(scope, o.PVName, root)
	if err != nil {
		return "", createState(err), err
	}
	return path, controller.ProvisioningFinished, nil
}

// volumeSpec is what the PV holds beyond what the controller fills in: the
// annotations Delete reads, the node affinity (value is the node label's)
// unless the volume is shared, and the volume source at path.
func (p *Provisioner) volumeSpec(vp volumeParams, node, value, path string, shared bool) controller.VolumeSpec {
	spec := controller.VolumeSpec{Annotations: map[string]string{AnnNode: node}}
	if vp.patterned {
		spec.Annotations[AnnDir] = vp.rel
	}
	if shared {
		spec.Annotations[AnnShared] = "true"
	} else {
		spec.NodeAffinity = nodeAffinity(p.cfg.NodeLabelKey, value)
	}
	if vp.volumeType == VolumeTypeLocal {
		spec.Source.Local = &corev1.LocalVolumeSource{Path: path}
	} else {
		// Directory, not DirectoryOrCreate: should the directory vanish,
		// the pod fails to start instead of silently getting an empty one.
		spec.Source.HostPath = &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectory)}
	}
	return spec
}

// mustBeEmpty says whether the volume's directory is one a claim's values
// named (pathPattern), which lib's gate.HandOutDirectory hands out only
// when empty, rather than one named by the PV itself (pvc-<claim UID>). The
// rule runs on the node, in lib/nofollow, for the built-in helper and for
// the path check before a setup script alike.
func mustBeEmpty(vp volumeParams) bool { return vp.patterned }

// createState is what a failed Create leaves behind.
func createState(err error) controller.ProvisioningState {
	switch {
	case errors.Is(err, ErrOutcomeUnknown), errors.Is(err, ErrInProgress):
		// A helper pod runs, or may have made the directory before it
		// was lost: the controller calls Provision again (which finds the
		// pod by its name), and cleans up if the claim is gone by then.
		return controller.ProvisioningInBackground
	case errors.Is(err, ErrNamespaceBusy), errors.Is(err, ErrNodeUnusable):
		// No pod was made: the Warning says why, and the retries are
		// bounded; whatever an earlier attempt left in progress still is.
		return controller.ProvisioningNoChange
	}
	return controller.ProvisioningFinished
}

// volumeParams is what a claim and its class ask for.
type volumeParams struct {
	volumeType string
	rel        string
	patterned  bool
	nodePath   string
}

// parse rejects what a directory cannot serve. Block claims never get here:
// the controller rejects them itself because this provisioner does not
// implement controller.BlockProvisioner.
func (p *Provisioner) parse(o controller.ProvisionOptions, paths *PathMap) (volumeParams, error) {
	vp := volumeParams{volumeType: VolumeTypeHostPath}
	if class := o.StorageClass; class != nil {
		if err := p.checkClass(class); err != nil {
			return vp, err
		}
		if err := vp.readClass(class, o, paths.Scripts); err != nil {
			return vp, err
		}
	}
	if v, ok := o.PVC.Annotations[KeyVolumeType]; ok {
		vp.volumeType = v
	}
	volumeType, err := canonicalVolumeType(vp.volumeType)
	if err != nil {
		return vp, err
	}
	vp.volumeType = volumeType
	if !vp.patterned {
		if err := checkName(o.PVName); err != nil {
			return vp, err
		}
		vp.rel = o.PVName
	}
	if _, ok := p.cfg.Dirs.(Limiter); !ok && paths.Enforce == EnforceAlways {
		return vp, fmt.Errorf("%w: enforceCapacity is %q, and helper pods make plain directories (they run without the privilege btrfs limits need): set enforceCapacity to %q, or run the provisioner on each node (--node-local)",
			ErrCannotEnforce, EnforceAlways, EnforceAuto)
	}
	// Claims with a data source never get here either: the controller
	// refuses them for provisioners that are no DataSourceProvisioner.
	return vp, p.checkPlacement(o.PVC, paths.Shared, vp.volumeType)
}

// checkClass refuses the class parameters, annotations and fields that
// this provisioner cannot honor, before any is read.
func (p *Provisioner) checkClass(class *storagev1.StorageClass) error {
	if err := refuseScriptPatterns(class); err != nil {
		return err
	}
	if err := controller.CheckParameters(class, KeyVolumeType, KeyNodePath, KeyPathPattern, KeyAllowUnsafePathPattern, KeyNodeAffinityKey); err != nil {
		return fmt.Errorf("StorageClass %s: %w; remove them", class.Name, err)
	}
	if key := class.Parameters[KeyNodeAffinityKey]; key != "" && key != p.cfg.NodeLabelKey {
		return fmt.Errorf("StorageClass %s parameter %s %s: this provisioner pins the volumes of every class by one node label, %s (--node-label-key): start it with --node-label-key=%s, or remove the parameter",
			class.Name, KeyNodeAffinityKey, key, p.cfg.NodeLabelKey, key)
	}
	if len(class.MountOptions) > 0 {
		return fmt.Errorf("StorageClass %s: mountOptions are not supported: hostPath volumes are not mounted; remove them", class.Name)
	}
	return nil
}

// readClass takes what the class asks for: the volume type (its parameter
// wins over local-path's annotation), the node path, and the directory its
// pathPattern names.
func (vp *volumeParams) readClass(class *storagev1.StorageClass, o controller.ProvisionOptions, s *Scripts) error {
	if v, ok := class.Annotations[AnnDefaultVolumeType]; ok {
		vp.volumeType = v
	}
	if v, ok := class.Parameters[KeyVolumeType]; ok {
		vp.volumeType = v
	}
	vp.nodePath = class.Parameters[KeyNodePath]
	pattern := class.Parameters[KeyPathPattern]
	if pattern == "" {
		return nil
	}
	rel, err := expandPattern(class, pattern, o, s)
	if err != nil {
		return fmt.Errorf("StorageClass %s parameter %s: %w", class.Name, KeyPathPattern, err)
	}
	vp.rel, vp.patterned = rel, true
	return nil
}

// canonicalVolumeType spells a volume type, given in any case as
// local-path takes it, as the PV is built from; any other type is refused.
func canonicalVolumeType(volumeType string) (string, error) {
	switch {
	case strings.EqualFold(volumeType, VolumeTypeHostPath):
		return VolumeTypeHostPath, nil
	case strings.EqualFold(volumeType, VolumeTypeLocal):
		return VolumeTypeLocal, nil
	}
	return "", fmt.Errorf("volumeType %q (claim annotation %s, class parameter %s or class annotation %s) must be %s or %s",
		volumeType, KeyVolumeType, KeyVolumeType, AnnDefaultVolumeType, VolumeTypeHostPath, VolumeTypeLocal)
}

// checkPlacement refuses what the volume's place cannot serve: a local
// volume on the sharedFileSystemPath (shared), which has no node, or
// access from several nodes to a volume on one of them.
func (p *Provisioner) checkPlacement(claim *corev1.PersistentVolumeClaim, shared, volumeType string) error {
	if shared != "" {
		if volumeType == VolumeTypeLocal {
			return fmt.Errorf("volumeType local needs a node, and volumes on the sharedFileSystemPath %s have none: use volumeType hostPath", shared)
		}
		return nil
	}
	mode := p.multiNodeMode()
	if mode == "" {
		// Every volume is on this instance's node, and every pod that uses
		// one is pinned there by its node affinity: ReadWriteMany and
		// ReadOnlyMany are as sound as ReadWriteOnce (the single-node mode).
		return nil
	}
	if err := controller.CheckAccessModes(claim, corev1.ReadWriteOnce, corev1.ReadWriteOncePod); err != nil {
		return fmt.Errorf("%w: a hostPath volume lives on one node, and this provisioner serves several (%s), whose pods could not share it; recreate the claim", err, mode)
	}
	return nil
}

// refuseScriptPatterns refuses local-path's userPattern, groupPattern and
// permPattern, as class parameters or annotations: they only reach its
// setup script.
func refuseScriptPatterns(class *storagev1.StorageClass) error {
	for _, key := range localPathScriptKeys {
		_, param := class.Parameters[key]
		_, ann := class.Annotations[key]
		if param || ann {
			return fmt.Errorf("StorageClass %s: %s is not supported: local-path hands it to its setup script, and hostpath-provisioner runs none: "+
				"new directories are root's with mode --dir-mode (%#o by default, writable by every user); give pods an fsGroup, or an init container that sets the owner, and remove %s",
				class.Name, key, uint32(DefaultDirMode), key)
		}
	}
	return nil
}

// expandPattern is the volume's directory that the class's pathPattern
// names; with scripts, each value it inserts is one shell word
// (scriptWord). A Go-template pattern (local-path's spelling) obeys local-path's
// rule too: the directory is <namespace>/<claim> or under it, unless the
// class sets allowUnsafePathPattern; ${...} patterns never had that rule.
func expandPattern(class *storagev1.StorageClass, pattern string, o controller.ProvisionOptions, s *Scripts) (string, error) {
	rules := pathpattern.Rules{Root: "the node path"}
	if s != nil {
		rules.Value = scriptWord
	}
	if !pathpattern.IsTemplate(pattern) {
		return pathpattern.Expand(pattern, o.PVC, o.PVName, rules)
	}
	unsafe, err := allowUnsafePathPattern(class)
	if err != nil {
		return "", err
	}
	rel, err := pathpattern.ExpandTemplate(pattern, o.PVC, o.PVName, rules)
	if err != nil || unsafe {
		return rel, err
	}
	claimDir := o.PVC.Namespace + "/" + o.PVC.Name
	if rel != claimDir && !strings.HasPrefix(rel, claimDir+"/") {
		return "", fmt.Errorf("%w %q: it expands to %q, which is not under %s/ ({{ .PVC.Namespace }}/{{ .PVC.Name }}/, so that each claim's directory is its own, as in local-path): "+
			"start the pattern with {{ .PVC.Namespace }}/{{ .PVC.Name }}/, or set the class parameter %s: \"true\" (paths that leave the node path or overlap another volume stay refused)",
			pathpattern.ErrPathPattern, pattern, rel, claimDir, KeyAllowUnsafePathPattern)
	}
	return rel, nil
}

// allowUnsafePathPattern reads the class parameter, or else the class
// annotation, as local-path does; a value that is not a boolean is an
// error, not false.
func allowUnsafePathPattern(class *storagev1.StorageClass) (bool, error) {
	v, ok := class.Parameters[KeyAllowUnsafePathPattern]
	where := "parameter"
	if !ok {
		v, ok = class.Annotations[KeyAllowUnsafePathPattern]
		where = "annotation"
	}
	if !ok {
		return false, nil
	}
	allow, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s %s %q is not a boolean: write \"true\" or \"false\"", where, KeyAllowUnsafePathPattern, v)
	}
	return allow, nil
}

// multiNodeMode names the flag by which this instance puts volumes on
// several nodes, or is empty when they all go on its own node.
func (p *Provisioner) multiNodeMode() string {
	switch {
	case p.cfg.NodeLocal:
		return "--node-local"
	case p.anyNode:
		return "--helper-pods"
	}
	return ""
}

// nodeLabelValue is the value of the node label the volume is pinned to.
func (p *Provisioner) nodeLabelValue(o controller.ProvisionOptions, node string) (string, error) {
	if p.cfg.NodeLabelKey == DefaultNodeLabelKey {
		return node, nil
	}
	if o.SelectedNode == nil {
		return "", fmt.Errorf("volumes are pinned by the node label %s (--node-label-key), which needs the node the scheduler selected: use a WaitForFirstConsumer StorageClass", p.cfg.NodeLabelKey)
	}
	v, ok := o.SelectedNode.Labels[p.cfg.NodeLabelKey]
	if !ok {
		return "", fmt.Errorf("node %s has no label %s (--node-label-key): label it, or choose another key", node, p.cfg.NodeLabelKey)
	}
	return v, nil
}

func nodeAffinity(key, value string) *corev1.VolumeNodeAffinity {
	na := controller.NodeAffinityForHostname(value)
	na.Required.NodeSelectorTerms[0].MatchExpressions[0].Key = key
	return na
}

// Delete removes the directory of a released volume of this node.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	node := pv.Annotations[AnnNode]
	if !p.servesVolume(pv) {
		return controller.Ignore("volume %s is on node %q, this instance serves node %s", pv.Name, node, p.cfg.Node)
	}
	rel, err := volumeRel(pv)
	if err != nil {
		return err
	}
	// The PV object can be edited; the directory removed is only ever one
	// this provisioner would make for it: its directory under a path the
	// configuration gives its node.
	paths, err := p.Paths().ForClass(pv.Spec.StorageClassName)
	if err != nil {
		return fmt.Errorf("refusing to delete: %w", err)
	}
	roots, _ := paths.PathsFor(node)
	got := volumePathOf(pv)
	root := rootOf(roots, got, rel)
	if root == "" {
		return fmt.Errorf("refusing to delete: the volume's path is %s, not %s under a path of node %s in the configuration (%v); remove the data yourself, then delete the PersistentVolume",
			quoted(got), rel, node, roots)
	}
	// Never remove another volume's directory along with this one.
	full := filepath.Join(root, rel)
	scope, where := volumeScope(node, pv.Annotations[AnnShared] == "true")
	existing, err := p.volumes(scope)
	if err != nil {
		return err
	}
	if err := p.inUse.Check(scope, full, pv.Name, where, existing); err != nil {
		return fmt.Errorf("refusing to delete: %w; delete the other volume first", err)
	}
	if err := p.cfg.Dirs.Remove(ctx, RemoveRequest{Node: node, Root: root, Rel: rel, PV: pv, Scripts: paths.Scripts}); err != nil {
		return fmt.Errorf("removing volume directory %s on node %s: %w", full, node, err)
	}
	p.inUse.Release(scope, full, pv.Name)
	p.releaseHold(scope, pv.Name)
	return nil
}

// volumeRel is the directory of pv relative to its path, as Provision
// recorded it: the annotation a pathPattern set, or else the PV's name.
// Either must be a plain relative path that stays under the path.
func volumeRel(pv *corev1.PersistentVolume) (string, error) {
	rel := pv.Name
	if d, ok := pv.Annotations[AnnDir]; ok {
		rel = d
	} else if err := checkName(pv.Name); err != nil {
		return "", err
	}
	if err := pathpattern.ValidateRelative(rel); err != nil {
		return "", fmt.Errorf("refusing to delete: annotation %s: %w; remove the data yourself, then delete the PersistentVolume", AnnDir, err)
	}
	return rel, nil
}

// rootOf is the one of roots under which rel is the volume's path got (the
// last one, should several match), or empty when none is.
func rootOf(roots []string, got, rel string) string {
	var root string
	for _, r := range roots {
		if got != "" && filepath.Clean(got) == filepath.Join(r, rel) {
			root = r
		}
	}
	return root
}

// volumeScope is the scope of pathpattern.InUse that a volume on node is
// compared in, and how messages name it: the node, or the shared file
// system, which every node sees (a scope no node name can be).
func volumeScope(node string, shared bool) (scope, where string) {
	if shared {
		return "/shared", "on the shared file system"
	}
	return node, "on node " + node
}

// reserve records the volume's directory under each candidate root, unless
// one is another volume's, or inside or above it; it returns them.
func (p *Provisioner) reserve(scope, where string, roots []string, rel, pvName string) ([]string, error) {
	existing, err := p.volumes(scope)
	if err != nil {
		return nil, err
	}
	var reserved []string
	for _, r := range roots {
		dir := filepath.Join(r, rel)
		if err := p.inUse.Reserve(scope, dir, pvName, where, existing); err != nil {
			for _, d := range reserved {
				p.inUse.Release(scope, d, pvName)
			}
			return nil, err
		}
		reserved = append(reserved, dir)
	}
	return reserved, nil
}

// volumes are the directories of the PVs of this provisioner in scope.
func (p *Provisioner) volumes(scope string) ([]pathpattern.Volume, error) {
	pvs, err := p.listVolumes()
	if err != nil {
		return nil, err
	}
	var vols []pathpattern.Volume
	for _, pv := range pvs {
		if s, _ := volumeScope(pv.Annotations[AnnNode], pv.Annotations[AnnShared] == "true"); s == scope {
			vols = append(vols, pathpattern.Volume{PV: pv.Name, Dir: filepath.Clean(volumePathOf(pv))})
		}
	}
	return vols, nil
}

// KeepVolume copies into a bound PV's cached form (controller.
// NewInformerFactory) what Config.Volumes is read for: the node, the
// volume's path and its capacity (the budgets).
func KeepVolume(full, cached *corev1.PersistentVolume) {
	// The cached annotations may be a map shared by every cached PV.
	kept := make(map[string]string, len(cached.Annotations)+2)
	maps.Copy(kept, cached.Annotations)
	for _, k := range []string{AnnNode, AnnShared} {
		if v, ok := full.Annotations[k]; ok {
			kept[k] = v
		}
	}
	cached.Annotations = kept
	cached.Spec.HostPath = full.Spec.HostPath
	cached.Spec.Local = full.Spec.Local
	cached.Spec.Capacity = full.Spec.Capacity
}

// checkName checks a PV name used as a directory name. Kubernetes object
// names cannot contain "/", but the path is where files get deleted, so
// check anyway.
func checkName(pvName string) error {
	if pvName == "" || pvName == "." || pvName == ".." || pvName != filepath.Base(pvName) {
		return fmt.Errorf("volume name %q is not a plain file name", pvName)
	}
	return nil
}

func containsPath(roots []string, p string) bool {
	for _, r := range roots {
		if r == filepath.Clean(p) {
			return true
		}
	}
	return false
}

// volumePathOf is the path of a hostPath or local PV, empty for others.
func volumePathOf(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	}
	return ""
}

func quoted(path string) string {
	if path == "" {
		return "not set"
	}
	return fmt.Sprintf("%q", path)
}
