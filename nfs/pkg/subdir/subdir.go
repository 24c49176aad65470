// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package subdir is subdir mode: each volume is a directory carved out of an
// existing NFS export that is mounted into the pod. The directory is named
// by the class's pathPattern and recorded on the PV, so that deletion acts on
// exactly that directory and never recomputes the pattern.
package subdir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/pathpattern"
	"github.com/kubeprov/external-storage/nfs/pkg/dirs"
	"github.com/kubeprov/external-storage/nfs/pkg/params"
)

// Class parameters of subdir mode (besides pathPattern and gid).
const (
	KeyOnDelete        = "onDelete"
	KeyArchiveOnDelete = "archiveOnDelete"
	KeyReuseExisting   = "reuseExisting"
	// KeyShare selects one of the shares configured with --share.
	KeyShare = "share"
)

// What happens to a volume's directory when its PV is deleted.
const (
	OnDeleteDelete  = "delete"
	OnDeleteRetain  = "retain"
	OnDeleteArchive = "archive"
	// DefaultOnDelete is what the former subdir provisioner did by default
	// (archiveOnDelete was true): nobody migrating loses data by surprise.
	DefaultOnDelete = OnDeleteArchive
)

// PV annotations.
const (
	// AnnPath is the volume's directory relative to the share.
	AnnPath = "nfs.kubeprov.io/subdir"
	// AnnOnDelete is the onDelete policy in force when the volume was made.
	AnnOnDelete = "nfs.kubeprov.io/on-delete"
	// AnnShare is the name of the share the volume is on; absent for the
	// default share. Informational: deletion goes by the PV's NFS source.
	AnnShare = "nfs.kubeprov.io/share"
)

// Share is one existing NFS export volumes are carved out of.
type Share struct {
	// Name is what a class's share parameter gives to select it; ""
	// only for the default share.
	Name string
	// Root is where the share is mounted in the pod.
	Root string
	// Server and Path name the share for clients (PV spec.nfs).
	Server, Path string
}

// String names the share in messages.
func (s Share) String() string {
	if s.Name == "" {
		return fmt.Sprintf("default NFS share %s:%s (mounted at %s)", s.Server, s.Path, s.Root)
	}
	return fmt.Sprintf("NFS share %q %s:%s (mounted at %s)", s.Name, s.Server, s.Path, s.Root)
}

// Config of a subdir-mode provisioner.
type Config struct {
	// Root, Server and Path are the default share, used by classes without
	// the share parameter; Server "" means there is none.
	Root, Server, Path string
	// Shares are further shares, selected by a class's share parameter.
	// Only these and the default share are ever used: a class cannot name
	// a server or path of its own.
	Shares []Share
	// Strict keeps the stricter rules this provisioner had before it
	// followed the former subdir provisioner: a label or annotation that
	// pathPattern reads and the claim lacks is an error (not ""), and
	// onDelete and archiveOnDelete that contradict each other are an error
	// (not onDelete winning).
	Strict bool
	// Ownership is the mode and owner of new directories unless the class
	// (gid) or the claim (the k8s-sigs.io/nfs-directory-* annotations) say
	// otherwise: NFS_DEFAULT_MODE, NFS_DEFAULT_UID, NFS_DEFAULT_GID.
	Ownership Ownership
	// Volumes, if set, is used to refuse a directory that another PV on the
	// same share already uses (or contains, or is inside of).
	Volumes corelisters.PersistentVolumeLister
}

// share is a Share of the provisioner.
type share struct {
	Share
}

// Provisioner implements controller.Provisioner for subdir mode.
type Provisioner struct {
	cfg Config
	// def is the default share, nil without one; named by name.
	def    *share
	named  map[string]*share
	shares []*share // all of them, the default first
	// inUse holds the directories of volumes made by this process and of
	// provisions under way, by server, as absolute paths on it: shares of
	// one server may be nested exports. It covers the time before a new PV
	// reaches the Volumes cache.
	inUse pathpattern.InUse
}

var (
	_ controller.Provisioner         = (*Provisioner)(nil)
	_ controller.ClaimMetadataReader = (*Provisioner)(nil)
)

// shareName is what a share may be named: a DNS label.
var shareName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// New checks cfg and returns the provisioner.
func New(cfg Config) (*Provisioner, error) {
	var errs []error
	p := &Provisioner{cfg: cfg, named: map[string]*share{}}
	hasDefault := cfg.Server != "" || cfg.Path != "" || len(cfg.Shares) == 0
	all := cfg.Shares
	if hasDefault {
		all = append([]Share{{Root: cfg.Root, Server: cfg.Server, Path: cfg.Path}}, all...)
	}
	for i, s := range all {
		errs = append(errs, p.addShare(s, hasDefault && i == 0)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// addShare adds s, the default share or a named one, and returns its
// problems: of its name, its location, and with the shares added before.
func (p *Provisioner) addShare(s Share, isDefault bool) []error {
	var errs []error
	what := "default NFS share"
	if !isDefault {
		what = fmt.Sprintf("NFS share %q", s.Name)
		if err := p.checkShareName(s.Name); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, checkShareLocation(what, s)...)
	s.Root, s.Path = path.Clean(s.Root), path.Clean(s.Path)
	errs = append(errs, p.checkShareOverlap(s)...)
	sh := &share{Share: s}
	if isDefault {
		sh.Name = ""
		p.def = sh
	} else {
		p.named[s.Name] = sh
	}
	p.shares = append(p.shares, sh)
	return errs
}

// checkShareName checks that a named share's name is valid and unique.
func (p *Provisioner) checkShareName(name string) error {
	if !shareName.MatchString(name) {
		return fmt.Errorf("NFS share name %q must be a DNS label (lower-case letters, digits and -)", name)
	}
	if p.named[name] != nil {
		return fmt.Errorf("NFS share %q is configured twice", name)
	}
	return nil
}

// checkShareLocation checks the mount point and export of s, the share what.
func checkShareLocation(what string, s Share) []error {
	var errs []error
	if !path.IsAbs(s.Root) {
		errs = append(errs, fmt.Errorf("%s: root %q must be an absolute path", what, s.Root))
	}
	if s.Server == "" {
		errs = append(errs, fmt.Errorf("%s: NFS server is empty", what))
	}
	if !path.IsAbs(s.Path) {
		errs = append(errs, fmt.Errorf("%s: NFS path %q must be an absolute path", what, s.Path))
	}
	return errs
}

// checkShareOverlap checks that s, with clean paths, is neither the export
// nor the mount point of a share added before.
func (p *Provisioner) checkShareOverlap(s Share) []error {
	var errs []error
	for _, o := range p.shares {
		switch {
		case o.Server == s.Server && o.Path == s.Path:
			errs = append(errs, fmt.Errorf("%s and %s are the same export", o.Share, s))
		case pathpattern.Overlap(o.Root, s.Root):
			// A mount inside another share's mount point would let
			// one share's pathPattern reach into the other.
			errs = append(errs, fmt.Errorf("%s and %s are mounted one inside the other; mount each share at a directory of its own", o.Share, s))
		}
	}
	return errs
}

// CheckShares checks that every share's mount point is a directory that
// answers within ctx, naming the share that does not.
func (p *Provisioner) CheckShares(ctx context.Context) error {
	var errs []error
	for _, s := range p.shares {
		errs = append(errs, s.check(ctx))
	}
	return errors.Join(errs...)
}

func (s *share) check(ctx context.Context) error {
	done := make(chan error, 1)
	// A hung NFS mount blocks stat forever: do not block the caller with it.
	go func() {
		st, err := os.Stat(s.Root)
		if err == nil && !st.IsDir() {
			err = fmt.Errorf("%s is not a directory", s.Root)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w; mount the export there", s.Share, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s does not answer: %w", s.Share, ctx.Err())
	}
}

type classParams struct {
	share *share
	rel   string
	// gid is the class's gid parameter, written on the PV for kubelet.
	gid      *int
	owner    Ownership
	onDelete string
	reuse    bool
}

func (p *Provisioner) parseParams(o controller.ProvisionOptions) (classParams, error) {
	class := o.StorageClass
	if _, ok := params.String(class, params.KeyRootSquash); ok {
		return classParams{}, fmt.Errorf("StorageClass %s parameter rootSquash applies to server mode only; in subdir mode squashing is set on the existing export's server", class.Name)
	}
	if err := params.CheckKnown(class, params.KeyGID, KeyPathPattern, KeyOnDelete, KeyArchiveOnDelete, KeyReuseExisting, KeyShare); err != nil {
		return classParams{}, err
	}
	var cp classParams
	var err error
	if cp.share, err = p.selectShare(class); err != nil {
		return cp, err
	}
	if cp.gid, err = params.GID(class); err != nil {
		return cp, err
	}
	// Claim annotations, then the class's gid, then the instance's defaults.
	cp.owner = p.cfg.Ownership
	if cp.gid != nil {
		mode := dirs.ModeGroup
		cp.owner.GID, cp.owner.Mode = cp.gid, &mode
	}
	if cp.owner, err = claimOwnership(o.PVC, cp.owner); err != nil {
		return cp, err
	}
	if cp.onDelete, err = onDelete(o, p.cfg.Strict); err != nil {
		return cp, err
	}
	if cp.reuse, _, err = params.Bool(class, KeyReuseExisting, false); err != nil {
		return cp, err
	}
	pattern, _ := params.String(class, KeyPathPattern)
	expand := Expand
	if p.cfg.Strict {
		expand = ExpandStrict
	}
	if cp.rel, err = expand(pattern, o.PVC, o.PVName); err != nil {
		return cp, fmt.Errorf("StorageClass %s parameter %s: %w", class.Name, KeyPathPattern, err)
	}
	return cp, nil
}

// selectShare returns the share the class's share parameter names, or the
// default share.
func (p *Provisioner) selectShare(class *storagev1.StorageClass) (*share, error) {
	name, given := params.String(class, KeyShare)
	if !given {
		if p.def == nil {
			return nil, fmt.Errorf("StorageClass %s must set parameter %s to one of the NFS shares this provisioner has: %s",
				class.Name, KeyShare, p.shareNames())
		}
		return p.def, nil
	}
	if s := p.named[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("StorageClass %s parameter %s %q names no NFS share of this provisioner; it has: %s (the --share flag lists them)",
		class.Name, KeyShare, name, p.shareNames())
}

func (p *Provisioner) shareNames() string {
	names := make([]string, 0, len(p.named))
	for n := range p.named {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "none but the default one"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// onDelete reads onDelete and the older archiveOnDelete. When both are
// given and contradict each other, onDelete wins, as in the former subdir
// provisioner; strict refuses the contradiction instead.
func onDelete(o controller.ProvisionOptions, strict bool) (string, error) {
	class := o.StorageClass
	od, odGiven := params.String(class, KeyOnDelete)
	od = strings.ToLower(strings.TrimSpace(od))
	if odGiven && od != OnDeleteDelete && od != OnDeleteRetain && od != OnDeleteArchive {
		return "", fmt.Errorf("StorageClass %s parameter onDelete must be %q, %q or %q, not %q",
			class.Name, OnDeleteDelete, OnDeleteRetain, OnDeleteArchive, od)
	}
	archive, archGiven, err := params.Bool(class, KeyArchiveOnDelete, false)
	if err != nil {
		return "", err
	}
	switch {
	case odGiven && archGiven:
		if strict && archive != (od == OnDeleteArchive) {
			return "", fmt.Errorf("StorageClass %s parameters onDelete %q and archiveOnDelete %q contradict each other; keep only onDelete (without strict mode, onDelete wins)",
				class.Name, od, class.Parameters[KeyArchiveOnDelete])
		}
		return od, nil
	case odGiven:
		return od, nil
	case archGiven && archive:
		return OnDeleteArchive, nil
	case archGiven:
		return OnDeleteDelete, nil
	default:
		return DefaultOnDelete, nil
	}
}

// ClaimMetadataKeys implements controller.ClaimMetadataReader: what the
// class's pathPattern reads and the ownership annotations, so that a
// Provision repeated after a restart makes the same directory.
func (p *Provisioner) ClaimMetadataKeys(class *storagev1.StorageClass) (labels, annotations []string) {
	if class == nil {
		return nil, slices.Clone(ownershipAnnotations)
	}
	labels, annotations = MetadataKeys(class.Parameters[KeyPathPattern])
	return labels, slices.Concat(annotations, ownershipAnnotations)
}

// Provision implements controller.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	cp, err := p.parseParams(o)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	sh := cp.share
	logger := klog.FromContext(ctx).WithValues("pv", o.PVName, "share", sh.Name, "subdir", cp.rel)
	if err := p.reserve(sh, cp.rel, o.PVName); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	created, err := makeDir(sh, o, cp)
	if err != nil {
		if !created {
			p.inUse.Release(sh.Server, sh.exportPath(cp.rel), o.PVName)
			return nil, controller.ProvisioningFinished, err
		}
		return nil, controller.ProvisioningInBackground, err
	}
	logger.V(2).Info("Volume directory ready", "created", created)
	gid := cp.gid
	if gid != nil {
		// The group the directory has, which a claim annotation may change.
		gid = cp.owner.GID
	}
	ann := params.Annotations(gid)
	ann[AnnPath] = cp.rel
	ann[AnnOnDelete] = cp.onDelete
	if sh.Name != "" {
		ann[AnnShare] = sh.Name
	}
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: sh.Server, Path: path.Join(sh.Path, cp.rel)},
		},
		Annotations: ann,
	}), controller.ProvisioningFinished, nil
}

// makeDir creates (or, when allowed, reuses) the directory and sets its
// group. It reports whether it created the directory.
func makeDir(sh *share, o controller.ProvisionOptions, cp classParams) (bool, error) {
	root, err := os.OpenRoot(sh.Root)
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", sh.Share, err)
	}
	defer func() { _ = root.Close() }()
	mode := dirs.ModeShared
	if cp.owner.Mode != nil {
		mode = *cp.owner.Mode
	}
	created, err := dirs.Create(root, cp.rel, mode)
	if err != nil {
		if errors.Is(err, dirs.ErrSymlink) || errors.Is(err, dirs.ErrNotDir) {
			return false, fmt.Errorf("StorageClass %s parameter %s: directory %q cannot be used: %w; symbolic links are never followed",
				o.StorageClass.Name, KeyPathPattern, cp.rel, err)
		}
		return false, fmt.Errorf("creating directory %q on the NFS share: %w", cp.rel, err)
	}
	if !created && !cp.reuse {
		// An empty directory is what an interrupted earlier attempt for this
		// volume leaves behind, and holds no data anybody could share.
		empty, err := dirs.Empty(root, cp.rel)
		if err != nil {
			return false, err
		}
		if !empty {
			return false, fmt.Errorf("directory %q already exists on the NFS share and is not empty; set %s: \"true\" in StorageClass %s to use existing directories, or change its %s",
				cp.rel, KeyReuseExisting, o.StorageClass.Name, KeyPathPattern)
		}
	}
	if created || cp.owner.set() {
		if err := dirs.SetOwner(root, cp.rel, cp.owner.UID, cp.owner.GID, mode); err != nil {
			return created, fmt.Errorf("setting the owner and mode of directory %q: %w", cp.rel, err)
		}
	}
	return created, nil
}

// reserve records rel on sh for pv, refusing it when it overlaps
// another volume's directory or another share's export (checkOverlap).
func (p *Provisioner) reserve(sh *share, rel, pv string) error {
	existing, err := p.checkExports(sh, rel)
	if err != nil {
		return err
	}
	return p.inUse.Reserve(sh.Server, sh.exportPath(rel), pv, "on NFS server "+sh.Server, existing)
}

// checkOverlap refuses rel on sh when another volume's directory is it,
// contains it or is inside it, or when it reaches into another share's
// export.
func (p *Provisioner) checkOverlap(sh *share, rel, pv string) error {
	existing, err := p.checkExports(sh, rel)
	if err != nil {
		return err
	}
	return p.inUse.Check(sh.Server, sh.exportPath(rel), pv, "on NFS server "+sh.Server, existing)
}

// checkExports refuses rel on sh when it is, holds or is inside the export
// of another share of the same server nested in sh (the default share
// /share and the share fast /share/fast): such a directory would hand out,
// or delete, the other share's volumes. It returns the directories of the
// volumes on the server's shares, as absolute paths on the server.
func (p *Provisioner) checkExports(sh *share, rel string) ([]pathpattern.Volume, error) {
	dir := sh.exportPath(rel)
	for _, o := range p.shares {
		if o != sh && o.Server == sh.Server && pathpattern.Overlap(o.Path, sh.Path) && len(o.Path) > len(sh.Path) && pathpattern.Overlap(dir, o.Path) {
			return nil, fmt.Errorf("directory %q on %s reaches into the export of %s; change the StorageClass's %s so that it stays out of %s",
				rel, sh.Share, o.Share, KeyPathPattern, o.Path)
		}
	}
	if p.cfg.Volumes == nil {
		return nil, nil
	}
	vols, err := p.cfg.Volumes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var existing []pathpattern.Volume
	for _, v := range vols {
		if o, rel, ok := p.shareOf(v); ok && o.Server == sh.Server {
			existing = append(existing, pathpattern.Volume{PV: v.Name, Dir: o.exportPath(rel)})
		}
	}
	return existing, nil
}

// exportPath is the absolute path of rel on the share's server.
func (s *share) exportPath(rel string) string {
	return path.Join(s.Path, rel)
}

// relOf returns the directory of a PV on this share, relative to it.
func (s *share) relOf(pv *corev1.PersistentVolume) (string, bool) {
	nfs := pv.Spec.NFS
	if nfs == nil || nfs.Server != s.Server {
		return "", false
	}
	full := path.Clean(nfs.Path)
	if s.Path == "/" {
		rel := strings.TrimPrefix(full, "/")
		return rel, rel != ""
	}
	rel, ok := strings.CutPrefix(full, s.Path+"/")
	return rel, ok && rel != ""
}

// shareOf returns the share a PV is on (the one with the longest path when
// shares of one server nest) and the PV's directory relative to it.
func (p *Provisioner) shareOf(pv *corev1.PersistentVolume) (*share, string, bool) {
	var best *share
	var bestRel string
	for _, s := range p.shares {
		if rel, ok := s.relOf(pv); ok && (best == nil || len(s.Path) > len(best.Path)) {
			best, bestRel = s, rel
		}
	}
	return best, bestRel, best != nil
}

// Delete implements controller.Provisioner.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	sh, rel, ok := p.shareOf(pv)
	if !ok {
		return controller.Ignore("PV %s is on none of the NFS shares of this provisioner", pv.Name)
	}
	if ann, ok := pv.Annotations[AnnPath]; ok && ann != rel {
		return fmt.Errorf("PV %s has annotation %s %q but its NFS path is %s; fix one of them", pv.Name, AnnPath, ann, pv.Spec.NFS.Path)
	}
	policy := pv.Annotations[AnnOnDelete]
	if policy == "" {
		// PVs of the former subdir provisioner: its default.
		policy = DefaultOnDelete
	}
	logger := klog.FromContext(ctx).WithValues("pv", pv.Name, "share", sh.Name, "subdir", rel, "onDelete", policy)
	root, err := os.OpenRoot(sh.Root)
	if err != nil {
		return fmt.Errorf("opening %s: %w", sh.Share, err)
	}
	defer func() { _ = root.Close() }()
	if policy != OnDeleteRetain {
		// A PV's NFS path is only what whoever created the PV wrote: never
		// remove a directory another volume uses, or one holding it.
		if err := p.checkOverlap(sh, rel, pv.Name); err != nil {
			return fmt.Errorf("not deleting PV %s's directory: %w", pv.Name, err)
		}
	}
	switch policy {
	case OnDeleteRetain:
	case OnDeleteDelete:
		if err := dirs.Remove(root, rel); err != nil {
			return fmt.Errorf("deleting directory %q: %w", rel, err)
		}
	case OnDeleteArchive:
		to, err := dirs.Archive(root, rel, pv.Name)
		if err != nil {
			return fmt.Errorf("archiving directory %q: %w", rel, err)
		}
		logger = logger.WithValues("archivedAs", to)
	default:
		return fmt.Errorf("PV %s has annotation %s %q; it must be %q, %q or %q",
			pv.Name, AnnOnDelete, policy, OnDeleteDelete, OnDeleteRetain, OnDeleteArchive)
	}
	p.inUse.Release(sh.Server, sh.exportPath(rel), pv.Name)
	logger.V(2).Info("Volume deleted")
	return nil
}

// Ready checks that every share is mounted and answers.
func (p *Provisioner) Ready(ctx context.Context) error {
	return p.CheckShares(ctx)
}
