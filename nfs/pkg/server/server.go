// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package server is server mode: each volume is a directory of the export
// root exported on its own by the NFS-Ganesha running beside nfs-provisioner.
// The EXPORT blocks in Ganesha's configuration file are the source of truth
// (re-read under a lock for every change), so exports and their ids survive
// restarts of either process.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/gidallocator"
	"github.com/kubeprov/external-storage/nfs/pkg/dirs"
	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	"github.com/kubeprov/external-storage/nfs/pkg/params"
	"github.com/kubeprov/external-storage/nfs/pkg/quota"
)

// PV annotations, as the classic nfs-provisioner wrote them.
const (
	AnnExportBlock   = "EXPORT_block"
	AnnExportID      = "Export_Id"
	AnnProvisionerID = "Provisioner_Id"
)

// KeyGIDAllocate gives each volume a group of its own from the class's
// gidMin-gidMax range (the key of the efs and glusterfs provisioners of
// kubernetes-incubator/external-storage), freed when the volume is deleted.
const KeyGIDAllocate = "gidAllocate"

// IdentityFile is the file in the export root holding this server's
// identity, so that a replacement pod with the same volume keeps owning the
// PVs and another server's PVs are left alone.
const IdentityFile = "nfs-provisioner.identity"

// DefaultMaxExports means no limit.
const DefaultMaxExports = -1

// Config of a server-mode provisioner.
type Config struct {
	// ExportRoot holds one directory per volume.
	ExportRoot string
	// GaneshaConfig is Ganesha's configuration file.
	GaneshaConfig string
	// Clients allowed to mount (ganesha.DefaultClients for all).
	Clients string
	// MaxExports refuses new volumes beyond this many; negative means no limit.
	MaxExports int
	// Server is the address clients mount from (PV spec.nfs.server).
	Server string
	// Identity of this server (LoadIdentity).
	Identity string
	// Exports is Ganesha's export manager.
	Exports ganesha.ExportManager
	// Quota, if set, limits each volume to its request.
	Quota quota.Quota
	// GIDs hands out the groups of classes with gidAllocate; without it
	// such classes are refused.
	GIDs *gidallocator.Allocator
}

// Provisioner implements controller.Provisioner for server mode.
type Provisioner struct {
	cfg Config
	// mu serializes edits of the configuration file.
	mu sync.Mutex
}

var _ controller.Provisioner = (*Provisioner)(nil)

// New checks cfg and returns the provisioner.
func New(cfg Config) (*Provisioner, error) {
	var errs []error
	if !filepath.IsAbs(cfg.ExportRoot) {
		errs = append(errs, fmt.Errorf("export root %q must be an absolute path", cfg.ExportRoot))
	}
	if !filepath.IsAbs(cfg.GaneshaConfig) {
		errs = append(errs, fmt.Errorf("ganesha configuration %q must be an absolute path", cfg.GaneshaConfig))
	}
	if cfg.Server == "" {
		errs = append(errs, errors.New("server address is empty"))
	}
	if cfg.Identity == "" {
		errs = append(errs, errors.New("identity is empty"))
	}
	if cfg.Exports == nil {
		errs = append(errs, errors.New("no export manager"))
	}
	if cfg.Clients == "" {
		cfg.Clients = ganesha.DefaultClients
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.ExportRoot = filepath.Clean(cfg.ExportRoot)
	return &Provisioner{cfg: cfg}, nil
}

// LoadIdentity returns the identity kept in root, creating it (a random id)
// on first use.
func LoadIdentity(root string) (string, error) {
	p := filepath.Join(root, IdentityFile)
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("identity file %s is empty; delete it to get a new identity (PVs recorded with the old one are then left alone)", p)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	// O_EXCL: two processes racing on first start agree on one identity.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644) //nolint:gosec // G302: the identity is no secret, and tools read it
	if errors.Is(err, fs.ErrExist) {
		return LoadIdentity(root)
	}
	if err != nil {
		return "", fmt.Errorf("creating identity file: %w", err)
	}
	if _, err := f.WriteString(id + "\n"); err != nil {
		_ = f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return "", err
	}
	return id, f.Close()
}

// classParams are the parsed StorageClass parameters.
type classParams struct {
	gid          *int
	squash       string
	mountOptions []string
	// allocate: gid comes from GIDs, with the range in params.
	allocate bool
	params   map[string]string
}

// parseParams reads the class's parameters; their keys are compared without
// regard to case, as the classic nfs-provisioner did.
func parseParams(o controller.ProvisionOptions) (classParams, error) {
	known := []string{params.KeyGID, params.KeyRootSquash, params.KeyMountOptions,
		KeyGIDAllocate, gidallocator.ParamGIDMin, gidallocator.ParamGIDMax}
	class, err := params.FoldKeys(o.StorageClass, known...)
	if err != nil {
		return classParams{}, err
	}
	o.StorageClass = class
	if err := params.CheckKnown(o.StorageClass, known...); err != nil {
		return classParams{}, err
	}
	mountOptions, err := params.MountOptions(o.StorageClass)
	if err != nil {
		return classParams{}, err
	}
	gid, err := params.GID(o.StorageClass)
	if err != nil {
		return classParams{}, err
	}
	rootSquash, _, err := params.Bool(o.StorageClass, params.KeyRootSquash, false)
	if err != nil {
		return classParams{}, err
	}
	allocate, err := allocateParams(o, gid != nil)
	if err != nil {
		return classParams{}, err
	}
	p := classParams{gid: gid, squash: ganesha.SquashNone, mountOptions: mountOptions, allocate: allocate, params: o.StorageClass.Parameters}
	if rootSquash {
		p.squash = ganesha.SquashRoot
	}
	return p, nil
}

// allocateParams checks gidAllocate and its range against the class's other
// parameters, so that a bad range is refused before anything is made.
func allocateParams(o controller.ProvisionOptions, fixedGID bool) (bool, error) {
	allocate, _, err := params.Bool(o.StorageClass, KeyGIDAllocate, false)
	if err != nil {
		return false, err
	}
	name := o.StorageClass.Name
	if !allocate {
		for _, k := range []string{gidallocator.ParamGIDMin, gidallocator.ParamGIDMax} {
			if _, ok := params.String(o.StorageClass, k); ok {
				return false, fmt.Errorf("StorageClass %s parameter %s has no effect without %s: \"true\"; add it or remove %s", name, k, KeyGIDAllocate, k)
			}
		}
		return false, nil
	}
	if fixedGID {
		return false, fmt.Errorf("StorageClass %s has both %s and %s: \"true\"; a volume gets either the one group or one of its own, keep one", name, params.KeyGID, KeyGIDAllocate)
	}
	if _, _, err := gidallocator.Range(o.StorageClass.Parameters); err != nil {
		return false, fmt.Errorf("StorageClass %s %w", name, err)
	}
	return true, nil
}

// allocateGID returns the volume's group from GIDs: the same one again for
// a retried Provision of the same PV.
func (p *Provisioner) allocateGID(ctx context.Context, o controller.ProvisionOptions, cp classParams) (*int, error) {
	if p.cfg.GIDs == nil {
		return nil, fmt.Errorf("StorageClass %s has %s, which this provisioner was started without", o.StorageClass.Name, KeyGIDAllocate)
	}
	gid, err := p.cfg.GIDs.Allocate(ctx, o.StorageClass.Name, o.PVName, cp.params)
	if err != nil {
		return nil, err
	}
	return &gid, nil
}

// releaseGID frees the group of PV pvName of class.
func (p *Provisioner) releaseGID(class, pvName string) {
	if p.cfg.GIDs != nil {
		p.cfg.GIDs.Release(&corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec:       corev1.PersistentVolumeSpec{StorageClassName: class},
		})
	}
}

// Provision implements controller.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	cp, err := parseParams(o)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := checkVolumeName(o.PVName); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if cp.allocate {
		if cp.gid, err = p.allocateGID(ctx, o, cp); err != nil {
			return nil, controller.ProvisioningFinished, err
		}
	}
	pv, state, err := p.provision(ctx, o, cp)
	if err != nil && cp.allocate && state == controller.ProvisioningFinished {
		// Nothing was made: the group is free again. In the background
		// case the retry gets it back.
		p.releaseGID(o.StorageClass.Name, o.PVName)
	}
	return pv, state, err
}

// provision makes and exports the volume's directory.
func (p *Provisioner) provision(ctx context.Context, o controller.ProvisionOptions, cp classParams) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	request := o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	dir := filepath.Join(p.cfg.ExportRoot, o.PVName)
	logger := klog.FromContext(ctx).WithValues("pv", o.PVName, "dir", dir)

	p.mu.Lock()
	defer p.mu.Unlock()
	file, err := ganesha.ParseFile(p.cfg.GaneshaConfig)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	block, found := file.ByPath(dir)
	if found && cp.allocate {
		// Made by an earlier attempt, perhaps before a restart that gave
		// this PV another group: the directory gets the one the PV records.
		if err := p.setGroup(o.PVName, cp.gid); err != nil {
			return nil, controller.ProvisioningInBackground, err
		}
	}
	if !found {
		// A new volume: check the limits before creating anything.
		if err := p.checkLimits(file, request); err != nil {
			return nil, controller.ProvisioningFinished, err
		}
		id, err := file.NextID()
		if err != nil {
			return nil, controller.ProvisioningFinished, err
		}
		if err := p.createDir(ctx, o.PVName, id, request, cp.gid); err != nil {
			// Whatever exists is found again by the next attempt or removed by Delete.
			return nil, controller.ProvisioningInBackground, err
		}
		e := ganesha.Export{ID: id, Path: dir, Squash: cp.squash, Clients: p.cfg.Clients}
		if err := ganesha.WriteFileAtomic(p.cfg.GaneshaConfig, file.WithExport(e)); err != nil {
			return nil, controller.ProvisioningInBackground, fmt.Errorf("adding the export to the Ganesha configuration: %w", err)
		}
		block = ganesha.Block{ID: id, Path: dir, Text: strings.TrimSuffix(e.Block(), "\n")}
		logger.V(2).Info("Export block written", "exportID", id)
	}
	if err := p.ensureExported(ctx, block); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	ann := params.Annotations(cp.gid)
	ann[AnnExportBlock] = block.Text
	ann[AnnExportID] = strconv.Itoa(int(block.ID))
	ann[AnnProvisionerID] = p.cfg.Identity
	pv := o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: p.cfg.Server, Path: dir},
		},
		Annotations: ann,
	})
	params.AddMountOptions(pv, cp.mountOptions)
	return pv, controller.ProvisioningFinished, nil
}

// checkLimits refuses a new volume beyond --max-exports or larger than the
// free space of the export root.
func (p *Provisioner) checkLimits(file *ganesha.File, request resource.Quantity) error {
	if p.cfg.MaxExports >= 0 {
		if n := p.countOwned(file); n >= p.cfg.MaxExports {
			return fmt.Errorf("this NFS server already has %d exports, the limit set with --max-exports; delete unused claims or raise the limit", n)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p.cfg.ExportRoot, &st); err != nil {
		return fmt.Errorf("checking free space of %s: %w", p.cfg.ExportRoot, err)
	}
	free := resource.NewQuantity(int64(st.Bavail)*int64(st.Bsize), resource.BinarySI) // #nosec G115 -- sizes fit int64 (Bsize is int32 on some platforms)
	if request.Cmp(*free) > 0 {
		return fmt.Errorf("the claim requests %s but the NFS server's export root %s has only %s free; request less or give the server more space",
			request.String(), p.cfg.ExportRoot, free.String())
	}
	return nil
}

// countOwned counts the exports of volume directories (children of the
// export root); other blocks in the file are not ours.
func (p *Provisioner) countOwned(file *ganesha.File) int {
	n := 0
	for _, b := range file.Blocks {
		if p.owned(b.Path) {
			n++
		}
	}
	return n
}

// checkVolumeName refuses volume names that are not plain directory names
// the provisioner may own in the export root: its own files and hidden
// directories (the identity file, Ganesha's recovery directory) live there too.
func checkVolumeName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || name != filepath.Base(name) || name == IdentityFile {
		return fmt.Errorf("volume name %q is not a name the provisioner gives volumes (a plain name, not hidden, not %s)", name, IdentityFile)
	}
	return nil
}

func (p *Provisioner) owned(path string) bool {
	return filepath.Dir(filepath.Clean(path)) == p.cfg.ExportRoot
}

// setGroup gives the volume directory name the group gid.
func (p *Provisioner) setGroup(name string, gid *int) error {
	root, err := os.OpenRoot(p.cfg.ExportRoot)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	if err := dirs.SetGroup(root, name, gid); err != nil {
		return fmt.Errorf("setting the group of the volume directory: %w", err)
	}
	return nil
}

func (p *Provisioner) createDir(ctx context.Context, name string, id uint16, request resource.Quantity, gid *int) error {
	root, err := os.OpenRoot(p.cfg.ExportRoot)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	mode := dirs.ModeShared
	if gid != nil {
		mode = dirs.ModeGroup
	}
	if _, err := dirs.Create(root, name, mode); err != nil {
		return fmt.Errorf("creating the volume directory: %w", err)
	}
	if err := p.setGroup(name, gid); err != nil {
		return err
	}
	if p.cfg.Quota != nil {
		if err := p.cfg.Quota.Set(ctx, filepath.Join(p.cfg.ExportRoot, name), uint32(id), request.Value()); err != nil {
			return err
		}
	}
	return nil
}

// ensureExported adds the export to Ganesha unless it is loaded already.
func (p *Provisioner) ensureExported(ctx context.Context, b ganesha.Block) error {
	loaded, err := p.cfg.Exports.Exports(ctx)
	if err != nil {
		return fmt.Errorf("asking NFS-Ganesha for its exports: %w", err)
	}
	if path, ok := loaded[b.ID]; ok {
		if filepath.Clean(path) != filepath.Clean(b.Path) {
			return fmt.Errorf("NFS-Ganesha serves export id %d as %s, not %s: its configuration changed behind nfs-provisioner's back", b.ID, path, b.Path)
		}
		return nil
	}
	if err := p.cfg.Exports.AddExport(ctx, p.cfg.GaneshaConfig, b.Path); err != nil {
		return fmt.Errorf("adding export %d (%s) to NFS-Ganesha: %w", b.ID, b.Path, err)
	}
	return nil
}

// Delete implements controller.Provisioner.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	dir, id, err := p.deletableExport(pv)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("pv", pv.Name, "dir", dir, "exportID", id)

	p.mu.Lock()
	defer p.mu.Unlock()
	// Refuse clients first, then forget the export, then the data.
	if err := p.unexport(ctx, logger, dir, id); err != nil {
		return err
	}
	if err := p.removeVolumeDir(ctx, dir, id); err != nil {
		return err
	}
	p.releaseGID(pv.Spec.StorageClassName, pv.Name)
	logger.V(2).Info("Volume deleted")
	return nil
}

// deletableExport checks that pv is a volume this provisioner made and
// returns its directory and export id.
func (p *Provisioner) deletableExport(pv *corev1.PersistentVolume) (string, uint16, error) {
	if err := controller.CheckOwner(pv, AnnProvisionerID, p.cfg.Identity); err != nil {
		return "", 0, err
	}
	if pv.Spec.NFS == nil {
		return "", 0, fmt.Errorf("PV %s has no NFS source", pv.Name)
	}
	dir := filepath.Clean(pv.Spec.NFS.Path)
	if !p.owned(dir) {
		return "", 0, fmt.Errorf("PV %s exports %s, which is not a directory of the export root %s", pv.Name, dir, p.cfg.ExportRoot)
	}
	// Only the directory this provisioner made for this PV, named after it,
	// is ever removed: never another volume's, never its own files.
	if err := checkVolumeName(pv.Name); err != nil {
		return "", 0, err
	}
	if filepath.Base(dir) != pv.Name {
		return "", 0, fmt.Errorf("PV %s exports %s, not the directory %s this provisioner made for it: not deleting anything; remove the data by hand, then the PV",
			pv.Name, dir, filepath.Join(p.cfg.ExportRoot, pv.Name))
	}
	n, err := strconv.ParseUint(pv.Annotations[AnnExportID], 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("PV %s has no valid %s annotation: %q", pv.Name, AnnExportID, pv.Annotations[AnnExportID])
	}
	return dir, uint16(n), nil
}

// unexport removes export id from Ganesha, then from its configuration,
// each only while it still exports dir.
func (p *Provisioner) unexport(ctx context.Context, logger klog.Logger, dir string, id uint16) error {
	loaded, err := p.cfg.Exports.Exports(ctx)
	if err != nil {
		return fmt.Errorf("asking NFS-Ganesha for its exports: %w", err)
	}
	if path, ok := loaded[id]; ok && filepath.Clean(path) == dir {
		if err := p.cfg.Exports.RemoveExport(ctx, id); err != nil {
			return fmt.Errorf("removing export %d from NFS-Ganesha: %w", id, err)
		}
		logger.V(2).Info("Export removed from NFS-Ganesha")
	}
	file, err := ganesha.ParseFile(p.cfg.GaneshaConfig)
	if err != nil {
		return err
	}
	if b, ok := file.ByID(id); ok && filepath.Clean(b.Path) == dir {
		if err := ganesha.WriteFileAtomic(p.cfg.GaneshaConfig, file.WithoutExport(b)); err != nil {
			return fmt.Errorf("removing the export from the Ganesha configuration: %w", err)
		}
	}
	return nil
}

// removeVolumeDir clears the quota of the volume directory dir, if it is
// still there, and removes it with its data.
func (p *Provisioner) removeVolumeDir(ctx context.Context, dir string, id uint16) error {
	if p.cfg.Quota != nil {
		if _, err := os.Lstat(dir); err == nil {
			if err := p.cfg.Quota.Clear(ctx, dir, uint32(id)); err != nil {
				return err
			}
		}
	}
	root, err := os.OpenRoot(p.cfg.ExportRoot)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	if err := dirs.Remove(root, filepath.Base(dir)); err != nil {
		return fmt.Errorf("removing the volume directory %s: %w", dir, err)
	}
	return nil
}

// Ready checks that Ganesha answers on D-Bus.
func (p *Provisioner) Ready(ctx context.Context) error {
	_, err := p.cfg.Exports.Exports(ctx)
	return err
}
