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
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/nfs/pkg/dirs"
	"github.com/kubeprov/external-storage/nfs/pkg/params"
)

// Class parameters of subdir mode (besides pathPattern and gid).
const (
	KeyOnDelete        = "onDelete"
	KeyArchiveOnDelete = "archiveOnDelete"
	KeyReuseExisting   = "reuseExisting"
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
)

// Config of a subdir-mode provisioner.
type Config struct {
	// Root is where the share is mounted in the pod.
	Root string
	// Server and Path name the share for clients (PV spec.nfs).
	Server, Path string
	// Volumes, if set, is used to refuse a directory that another PV on the
	// same share already uses (or contains, or is inside of).
	Volumes corelisters.PersistentVolumeLister
}

// Provisioner implements controller.Provisioner for subdir mode.
type Provisioner struct {
	cfg Config
	// mu guards inUse: directories (relative) of volumes made by this
	// process and of provisions under way, by PV name. It covers the time
	// before a new PV reaches the Volumes cache.
	mu    sync.Mutex
	inUse map[string]string
}

var _ controller.Provisioner = (*Provisioner)(nil)

// New checks cfg and returns the provisioner.
func New(cfg Config) (*Provisioner, error) {
	var errs []error
	if !path.IsAbs(cfg.Root) {
		errs = append(errs, fmt.Errorf("NFS root %q must be an absolute path", cfg.Root))
	}
	if cfg.Server == "" {
		errs = append(errs, errors.New("NFS server is empty"))
	}
	if !path.IsAbs(cfg.Path) {
		errs = append(errs, fmt.Errorf("NFS path %q must be an absolute path", cfg.Path))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.Path = path.Clean(cfg.Path)
	return &Provisioner{cfg: cfg, inUse: map[string]string{}}, nil
}

type classParams struct {
	rel      string
	gid      *int
	onDelete string
	reuse    bool
}

func parseParams(o controller.ProvisionOptions) (classParams, error) {
	class := o.StorageClass
	if _, ok := params.String(class, params.KeyRootSquash); ok {
		return classParams{}, fmt.Errorf("StorageClass %s parameter rootSquash applies to server mode only; in subdir mode squashing is set on the existing export's server", class.Name)
	}
	if err := params.CheckKnown(class, params.KeyGID, KeyPathPattern, KeyOnDelete, KeyArchiveOnDelete, KeyReuseExisting); err != nil {
		return classParams{}, err
	}
	var p classParams
	var err error
	if p.gid, err = params.GID(class); err != nil {
		return p, err
	}
	if p.onDelete, err = onDelete(o); err != nil {
		return p, err
	}
	if p.reuse, _, err = params.Bool(class, KeyReuseExisting, false); err != nil {
		return p, err
	}
	pattern, _ := params.String(class, KeyPathPattern)
	if p.rel, err = Expand(pattern, o.PVC, o.PVName); err != nil {
		return p, fmt.Errorf("StorageClass %s parameter %s: %w", class.Name, KeyPathPattern, err)
	}
	return p, nil
}

// onDelete reads onDelete and the older archiveOnDelete; both may be given
// when they agree.
func onDelete(o controller.ProvisionOptions) (string, error) {
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
		if archive != (od == OnDeleteArchive) {
			return "", fmt.Errorf("StorageClass %s parameters onDelete %q and archiveOnDelete %q contradict each other; keep only onDelete",
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
// class's pathPattern reads, so that a Provision repeated after a restart
// names the same directory.
func (p *Provisioner) ClaimMetadataKeys(class *storagev1.StorageClass) (labels, annotations []string) {
	if class == nil {
		return nil, nil
	}
	return MetadataKeys(class.Parameters[KeyPathPattern])
}

// Provision implements controller.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	cp, err := parseParams(o)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	logger := klog.FromContext(ctx).WithValues("pv", o.PVName, "subdir", cp.rel)
	if err := p.reserve(cp.rel, o.PVName); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	created, err := p.makeDir(o, cp)
	if err != nil {
		if !created {
			p.release(cp.rel, o.PVName)
			return nil, controller.ProvisioningFinished, err
		}
		return nil, controller.ProvisioningInBackground, err
	}
	logger.V(2).Info("Volume directory ready", "created", created)
	ann := params.Annotations(cp.gid)
	ann[AnnPath] = cp.rel
	ann[AnnOnDelete] = cp.onDelete
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: p.cfg.Server, Path: path.Join(p.cfg.Path, cp.rel)},
		},
		Annotations: ann,
	}), controller.ProvisioningFinished, nil
}

// makeDir creates (or, when allowed, reuses) the directory and sets its
// group. It reports whether it created the directory.
func (p *Provisioner) makeDir(o controller.ProvisionOptions, cp classParams) (bool, error) {
	root, err := os.OpenRoot(p.cfg.Root)
	if err != nil {
		return false, fmt.Errorf("opening the NFS share mounted at %s: %w", p.cfg.Root, err)
	}
	defer func() { _ = root.Close() }()
	mode := dirs.ModeShared
	if cp.gid != nil {
		mode = dirs.ModeGroup
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
	if created || cp.gid != nil {
		if err := dirs.SetGroup(root, cp.rel, cp.gid); err != nil {
			return created, fmt.Errorf("setting the group of directory %q: %w", cp.rel, err)
		}
	}
	return created, nil
}

// reserve records rel for pv, refusing it when another volume's directory
// is rel, contains it or is inside it.
func (p *Provisioner) reserve(rel, pv string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkOverlap(rel, pv); err != nil {
		return err
	}
	p.inUse[rel] = pv
	return nil
}

// checkOverlap refuses rel when another volume's directory is rel, contains
// it or is inside it; p.mu is held.
func (p *Provisioner) checkOverlap(rel, pv string) error {
	for other, owner := range p.inUse {
		if owner != pv && dirs.Within(rel, other) {
			return conflict(rel, other, owner)
		}
	}
	if p.cfg.Volumes != nil {
		vols, err := p.cfg.Volumes.List(labels.Everything())
		if err != nil {
			return err
		}
		for _, v := range vols {
			other, ok := p.relOf(v)
			if ok && v.Name != pv && dirs.Within(rel, other) {
				return conflict(rel, other, v.Name)
			}
		}
	}
	return nil
}

func conflict(rel, other, owner string) error {
	if rel == other {
		return fmt.Errorf("directory %q on the NFS share is already used by PersistentVolume %s; change the StorageClass's %s so that claims get distinct directories",
			rel, owner, KeyPathPattern)
	}
	return fmt.Errorf("directory %q on the NFS share overlaps directory %q of PersistentVolume %s; change the StorageClass's %s so that volumes do not nest",
		rel, other, owner, KeyPathPattern)
}

func (p *Provisioner) release(rel, pv string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse[rel] == pv {
		delete(p.inUse, rel)
	}
}

// relOf returns the directory of a PV on this share, relative to it.
func (p *Provisioner) relOf(pv *corev1.PersistentVolume) (string, bool) {
	nfs := pv.Spec.NFS
	if nfs == nil || nfs.Server != p.cfg.Server {
		return "", false
	}
	full := path.Clean(nfs.Path)
	if p.cfg.Path == "/" {
		rel := strings.TrimPrefix(full, "/")
		return rel, rel != ""
	}
	rel, ok := strings.CutPrefix(full, p.cfg.Path+"/")
	return rel, ok && rel != ""
}

// Delete implements controller.Provisioner.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	rel, ok := p.relOf(pv)
	if !ok {
		return controller.Ignore("PV %s is not on NFS share %s:%s", pv.Name, p.cfg.Server, p.cfg.Path)
	}
	if ann, ok := pv.Annotations[AnnPath]; ok && ann != rel {
		return fmt.Errorf("PV %s has annotation %s %q but its NFS path is %s; fix one of them", pv.Name, AnnPath, ann, pv.Spec.NFS.Path)
	}
	policy := pv.Annotations[AnnOnDelete]
	if policy == "" {
		// PVs of the former subdir provisioner: its default.
		policy = DefaultOnDelete
	}
	logger := klog.FromContext(ctx).WithValues("pv", pv.Name, "subdir", rel, "onDelete", policy)
	root, err := os.OpenRoot(p.cfg.Root)
	if err != nil {
		return fmt.Errorf("opening the NFS share mounted at %s: %w", p.cfg.Root, err)
	}
	defer func() { _ = root.Close() }()
	if policy != OnDeleteRetain {
		// A PV's NFS path is only what whoever created the PV wrote: never
		// remove a directory another volume uses, or one holding it.
		p.mu.Lock()
		err := p.checkOverlap(rel, pv.Name)
		p.mu.Unlock()
		if err != nil {
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
	p.release(rel, pv.Name)
	logger.V(2).Info("Volume deleted")
	return nil
}

// Ready checks that the share is mounted and answers.
func (p *Provisioner) Ready(ctx context.Context) error {
	done := make(chan error, 1)
	// A hung NFS mount blocks stat forever: do not block the caller with it.
	go func() {
		_, err := os.Stat(p.cfg.Root)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("NFS share at %s does not answer: %w", p.cfg.Root, ctx.Err())
	}
}
