// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// NonRootID is the uid and gid images run as (distroless' "nonroot").
	NonRootID = 65532

	defaultCACertificates = "/etc/ssl/certs/ca-certificates.crt"
	// caBundlePath is where Go's crypto/x509 looks first on Linux.
	caBundlePath = "etc/ssl/certs/ca-certificates.crt"
	binDir       = "usr/local/bin"

	labelSource   = "org.opencontainers.image.source"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelTitle    = "org.opencontainers.image.title"
	labelCreated  = "org.opencontainers.image.created"
	annotationRef = "org.opencontainers.image.ref.name"
)

type buildOptions struct {
	Name, Version, Revision, Source, Tag string
	Created                              time.Time
	Binaries                             platformFlag
	CACertificates                       string
	Out                                  string
	// RootFS is, per platform, a gzip-compressed tar of an operating
	// system's files (imagebuild rootfs) laid below the base layer.
	RootFS map[string]string
	// User the image runs as; default the nonroot user.
	User string
	// Provenance is recorded in each platform's provenance statement.
	Provenance provenanceOptions
	// ExposedPorts (such as 2049/tcp) and Volumes are recorded in the
	// configuration, as a Dockerfile's EXPOSE and VOLUME do.
	ExposedPorts, Volumes []string
	// PlatformLabels are labels of one platform's image only, by platform
	// (such as the Debian suites of its root filesystem).
	PlatformLabels map[string]map[string]string
}

func (o *buildOptions) validate() error {
	var missing []string
	for flag, v := range map[string]string{"-name": o.Name, "-version": o.Version, "-revision": o.Revision, "-source": o.Source, "-o": o.Out} {
		if v == "" {
			missing = append(missing, flag)
		}
	}
	if len(o.Binaries) == 0 {
		missing = append(missing, "-binary")
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if strings.ContainsAny(o.Name, "/ ") {
		return fmt.Errorf("-name %q: want a plain file name", o.Name)
	}
	for p := range o.PlatformLabels {
		if !slices.Contains(o.Binaries.platforms(), p) {
			return fmt.Errorf("-platform-label for %s, which has no -binary", p)
		}
	}
	return nil
}

// platformFlag collects -binary OS/ARCH[/VARIANT]=PATH in the order given.
type platformFlag []platformBinary

type platformBinary struct {
	Platform v1.Platform
	Path     string
}

func (f *platformFlag) String() string { return fmt.Sprint(f.platforms()) }

func (f *platformFlag) Set(s string) error {
	spec, file, ok := strings.Cut(s, "=")
	if !ok || file == "" {
		return fmt.Errorf("%q: want OS/ARCH[/VARIANT]=PATH", s)
	}
	p, err := v1.ParsePlatform(spec)
	if err != nil || p.OS == "" || p.Architecture == "" {
		return fmt.Errorf("%q: want OS/ARCH[/VARIANT]=PATH", s)
	}
	for _, b := range *f {
		if b.Platform.Equals(*p) {
			return fmt.Errorf("platform %s given twice", spec)
		}
	}
	*f = append(*f, platformBinary{Platform: *p, Path: file})
	return nil
}

func (f platformFlag) platforms() []string {
	var out []string
	for _, b := range f {
		out = append(out, b.Platform.String())
	}
	return out
}

// build writes the layout and returns the image index digest.
func build(o buildOptions) (v1.Hash, error) {
	labels := map[string]string{
		labelSource:   o.Source,
		labelVersion:  o.Version,
		labelRevision: o.Revision,
		labelTitle:    o.Name,
		labelCreated:  o.Created.Format(time.RFC3339),
	}
	caBundle, err := os.ReadFile(o.CACertificates)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("reading the CA bundle for the base layer (apt-get install ca-certificates): %w", err)
	}

	index, referrers, err := platformIndex(o, caBundle, labels)
	if err != nil {
		return v1.Hash{}, err
	}
	index = mutate.Annotations(index, labels).(v1.ImageIndex)
	digest, err := index.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	// A new layout beside the old one, then swapped in: a layout only grows
	// when appended to, and test packages running in parallel build the
	// same image into the same directory (one removing it while another
	// wrote into it failed a CI run).
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil { //nolint:gosec // G301: a build output directory, read by make push and by users
		return v1.Hash{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.Out), "."+filepath.Base(o.Out)+"-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	lp, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	var refOpts []layout.Option
	if o.Tag != "" {
		refOpts = append(refOpts, layout.WithAnnotations(map[string]string{annotationRef: o.Tag}))
	}
	if err := lp.AppendIndex(index, refOpts...); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the OCI layout to %s: %w", o.Out, err)
	}
	// Listed in index.json too, as the image layout spec allows, so that
	// push finds them without scanning the blobs.
	for _, r := range referrers {
		if err := lp.AppendImage(r); err != nil {
			return v1.Hash{}, fmt.Errorf("writing the SBOM and provenance to %s: %w", o.Out, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // G302: the image layout is published output (MkdirTemp made it 0700)
		return v1.Hash{}, err
	}
	return digest, swapDir(tmp, o.Out)
}

// platformIndex is the image index of every platform's image, and the
// artifacts (SBOM, provenance) that refer to those images.
func platformIndex(o buildOptions, caBundle []byte, labels map[string]string) (v1.ImageIndex, []v1.Image, error) {
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var referrers []v1.Image
	for _, b := range o.Binaries {
		img, err := platformImage(o, b, caBundle, labels)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", b.Platform, err)
		}
		// Per platform manifest: each has its own binary and packages.
		arts, err := attestations(o, b, img)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", b.Platform, err)
		}
		referrers = append(referrers, arts...)
		p := b.Platform
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	return index, referrers, nil
}

// swapDir puts dir in place of out. Another build may swap in its own
// (identical) layout at the same moment: the last one stays.
func swapDir(dir, out string) error {
	var err error
	for range 5 {
		old := dir + ".old"
		if err = os.Rename(out, old); err != nil && !os.IsNotExist(err) {
			continue
		}
		if err = os.Rename(dir, out); err == nil {
			return os.RemoveAll(old)
		}
	}
	return fmt.Errorf("replacing %s: %w", out, err)
}

// platformImage is the base layer (above the platform's root filesystem, if
// any) plus the binary, configured to run it as the nonroot user (or
// o.User).
func platformImage(o buildOptions, b platformBinary, caBundle []byte, labels map[string]string) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, osFiles, err := appendRootFS(img, o, b.Platform)
	if err != nil {
		return nil, err
	}
	if img, err = appendBinary(img, o, b, baseFiles(caBundle, osFiles)); err != nil {
		return nil, err
	}
	if extra := o.PlatformLabels[b.Platform.String()]; len(extra) > 0 {
		labels = maps.Clone(labels)
		maps.Copy(labels, extra)
	}
	return configure(img, o, b.Platform, imageEnv(o.RootFS[b.Platform.String()] != ""), labels)
}

// appendRootFS lays the platform's root filesystem, if o gives one, onto
// img, and returns the files of it that the base layer extends. Once one
// platform has a root filesystem, every platform needs one.
func appendRootFS(img v1.Image, o buildOptions, p v1.Platform) (v1.Image, map[string][]byte, error) {
	rootfs := o.RootFS[p.String()]
	if rootfs == "" {
		if len(o.RootFS) > 0 {
			return nil, nil, fmt.Errorf("no root filesystem given for %s", p)
		}
		return img, nil, nil
	}
	layer, err := tarball.LayerFromFile(rootfs, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, nil, fmt.Errorf("root filesystem %s: %w", rootfs, err)
	}
	osFiles, err := readFiles(rootfs, "etc/passwd", "etc/group", "etc/nsswitch.conf")
	if err != nil {
		return nil, nil, fmt.Errorf("root filesystem %s: %w", rootfs, err)
	}
	created := v1.Time{Time: o.Created}
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: created, CreatedBy: "imagebuild: operating system packages (imagebuild rootfs)"}}); err != nil {
		return nil, nil, err
	}
	return img, osFiles, nil
}

// appendBinary lays the base layer (base, its files) and the layer of the
// binary, which must be an ELF file, onto img.
func appendBinary(img v1.Image, o buildOptions, b platformBinary, base []file) (v1.Image, error) {
	baseLayer, err := newLayer(base, o.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	if len(bin) < 4 || !bytes.Equal(bin[:4], []byte("\x7fELF")) {
		return nil, fmt.Errorf("%s is not an ELF binary", b.Path)
	}
	app, err := newLayer(appFiles(o.Name, bin), o.Created)
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	created := v1.Time{Time: o.Created}
	return mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, History: v1.History{Created: created, CreatedBy: "imagebuild: CA certificates, nonroot user, /tmp"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: created, CreatedBy: "imagebuild: /" + binDir + "/" + o.Name}},
	)
}

// imageEnv is the image's environment: a PATH for a static binary, or
// Debian's above a root filesystem, and where the CA bundle is.
func imageEnv(withRootFS bool) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/" + caBundlePath}
	if withRootFS {
		// Debian's PATH: its daemons live in /sbin and /usr/sbin too.
		env[0] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return env
}

// configure writes img's configuration: the platform, the binary as the
// entrypoint, run as the nonroot user (or o.User) with env, o's exposed
// ports and volumes, and labels, which also annotate the manifest.
func configure(img v1.Image, o buildOptions, p v1.Platform, env []string, labels map[string]string) (v1.Image, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: o.Created}
	cfg.OS, cfg.Architecture, cfg.Variant, cfg.OSVersion = p.OS, p.Architecture, p.Variant, p.OSVersion
	cfg.Config.Entrypoint = []string{"/" + binDir + "/" + o.Name}
	cfg.Config.Cmd = nil
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRootID, NonRootID)
	if o.User != "" {
		cfg.Config.User = o.User
	}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = env
	cfg.Config.ExposedPorts = addKeys(cfg.Config.ExposedPorts, o.ExposedPorts)
	cfg.Config.Volumes = addKeys(cfg.Config.Volumes, o.Volumes)
	cfg.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// addKeys adds keys to set, which it makes for the first one: without
// keys, a nil set stays nil (no empty field in the configuration).
func addKeys(set map[string]struct{}, keys []string) map[string]struct{} {
	for _, k := range keys {
		if set == nil {
			set = map[string]struct{}{}
		}
		set[k] = struct{}{}
	}
	return set
}

// file is one tar entry; a nil Data with a trailing "/" in Name is a directory.
type file struct {
	Name     string
	Mode     int64
	UID, GID int
	Data     []byte
}

func dir(name string, mode int64, id int) file {
	return file{Name: name + "/", Mode: mode, UID: id, GID: id}
}

// baseFiles is what distroless' static image offers that a Go binary uses:
// CA certificates for TLS to backends, a passwd/group naming the nonroot user
// (some libraries look the user up), nsswitch.conf so that /etc/hosts is
// consulted before DNS, and a writable /tmp. Above a root filesystem, its
// passwd, group and nsswitch.conf (osFiles) are kept, with the nonroot user
// added.
func baseFiles(caBundle []byte, osFiles map[string][]byte) []file {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" //nolint:gosec // G101: the format of /etc/passwd, no credential
	group := "root:x:0:\n"
	nsswitch := "hosts: files dns\n"
	if f, ok := osFiles["etc/passwd"]; ok {
		passwd = string(f)
	}
	if f, ok := osFiles["etc/group"]; ok {
		group = string(f)
	}
	if f, ok := osFiles["etc/nsswitch.conf"]; ok {
		nsswitch = string(f)
	}
	passwd += fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootID, NonRootID)
	group += fmt.Sprintf("nonroot:x:%d:\n", NonRootID)
	return []file{
		dir("etc", 0o755, 0),
		{Name: "etc/group", Mode: 0o644, Data: []byte(group)},
		{Name: "etc/nsswitch.conf", Mode: 0o644, Data: []byte(nsswitch)},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		{Name: caBundlePath, Mode: 0o644, Data: caBundle},
		dir("home", 0o755, 0),
		dir("home/nonroot", 0o700, NonRootID),
		dir("root", 0o700, 0),
		dir("tmp", 0o1777, 0),
	}
}

func appFiles(name string, bin []byte) []file {
	return []file{
		dir("usr", 0o755, 0),
		dir("usr/local", 0o755, 0),
		dir(binDir, 0o755, 0),
		{Name: path.Join(binDir, name), Mode: 0o755, Data: bin},
	}
}

// newLayer writes files into a gzip-compressed tar, deterministically: fixed
// order, owners and times.
func newLayer(files []file, modTime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{
			Name:    f.Name,
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: modTime,
			Format:  tar.FormatPAX,
		}
		if strings.HasSuffix(f.Name, "/") {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// readFiles returns those of names (without a leading "/") that the
// gzip-compressed tar at path holds as regular files.
func readFiles(path string, names ...string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	found := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		if name := cleanName(hdr.Name); hdr.Typeflag == tar.TypeReg && slices.Contains(names, name) {
			if found[name], err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
	}
}
