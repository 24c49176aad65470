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
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A root filesystem of Debian packages, for images that need OS tools (the
// nfs server mode runs NFS-Ganesha, rpcbind and D-Bus). hack/debian-rootfs.sh
// resolves and downloads the packages with apt; rootfs unpacks them into one
// layer as dpkg would, without running their maintainer scripts, and writes
// what those scripts and a base system would have left that the image
// needs: the system users, dpkg's status (so that image scanners see the
// packages), /run, /tmp, /etc/mtab.

// systemUser is a user (and its group of the same name, unless GID names an
// existing group) that a package's maintainer script would create.
type systemUser struct {
	Name     string
	UID, GID int
	Home     string
}

// usersFlag collects -user NAME:UID:GID[:HOME].
type usersFlag []systemUser

func (f *usersFlag) String() string { return fmt.Sprint(*f) }

func (f *usersFlag) Set(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] == "" {
		return fmt.Errorf("%q: want NAME:UID:GID[:HOME]", s)
	}
	uid, err1 := strconv.Atoi(parts[1])
	gid, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return fmt.Errorf("%q: want numeric UID and GID", s)
	}
	u := systemUser{Name: parts[0], UID: uid, GID: gid, Home: "/nonexistent"}
	if len(parts) == 4 {
		u.Home = parts[3]
	}
	*f = append(*f, u)
	return nil
}

// baseUsers are Debian's fixed users and groups (base-passwd) that files
// and daemons commonly refer to.
var baseUsers = []systemUser{
	{Name: "root", UID: 0, GID: 0, Home: "/root"},
	{Name: "daemon", UID: 1, GID: 1, Home: "/usr/sbin"},
	{Name: "bin", UID: 2, GID: 2, Home: "/bin"},
	{Name: "sys", UID: 3, GID: 3, Home: "/dev"},
	{Name: "nobody", UID: 65534, GID: 65534, Home: "/nonexistent"},
}

// baseGroups without a user of the same name.
var baseGroups = map[int]string{4: "adm", 5: "tty", 42: "shadow", 65534: "nogroup"}

// rootfsOptions are the flags of imagebuild rootfs.
type rootfsOptions struct {
	Debs  []string
	Users usersFlag
	Out   string
}

// entry is one file of the merged tree.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// buildRootfs unpacks the packages in the order given (a later package's
// file replaces an earlier one's, as dpkg does with Replaces) and writes
// the tree as a gzip-compressed tar, sorted by name so that parents come
// before their children. Owners, modes and times are the packages' own;
// generated files take the newest time found in the packages, so the same
// packages always give the same bytes.
func buildRootfs(o rootfsOptions) error {
	tree := map[string]*entry{}
	var newest time.Time
	var status bytes.Buffer
	for _, deb := range o.Debs {
		control, err := exec.Command("dpkg-deb", "--field", deb).Output()
		if err != nil {
			return fmt.Errorf("reading the control fields of %s: %w", deb, err)
		}
		status.Write(dpkgStatus(control))
		status.WriteString("\n")
		if err := unpackDeb(deb, tree, &newest); err != nil {
			return fmt.Errorf("%s: %w", deb, err)
		}
	}
	for _, f := range generatedFiles(tree, o.Users, status.Bytes()) {
		if _, ok := tree[f.hdr.Name]; ok && f.hdr.Typeflag != tar.TypeReg {
			continue // the packages' own directory or link wins
		}
		if f.hdr.Typeflag == tar.TypeSymlink && path.IsAbs(f.hdr.Linkname) {
			moveThroughLink(tree, f.hdr.Name, strings.TrimPrefix(f.hdr.Linkname, "/"))
		}
		f.hdr.ModTime = newest
		f.hdr.Format = tar.FormatPAX
		tree[f.hdr.Name] = f
	}
	return writeTree(o.Out, tree)
}

// moveThroughLink moves what packages put under link (a directory of
// theirs, var/run/, where the base system has a symlink, var/run -> /run)
// to target, as dpkg unpacks through an existing link; otherwise the layer
// would hold both a link and a directory of one name, which tar and
// container runtimes extract differently. An entry already at target wins.
func moveThroughLink(tree map[string]*entry, link, target string) {
	prefix := link + "/"
	for name, e := range tree {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		delete(tree, name)
		if rest == "" {
			continue // the directory itself: the link takes its place
		}
		moved := target + "/" + rest
		if _, taken := tree[moved]; !taken {
			e.hdr.Name = moved
			tree[moved] = e
		}
	}
}

// unpackDeb adds the files of a package (dpkg-deb --fsys-tarfile) to tree.
func unpackDeb(deb string, tree map[string]*entry, newest *time.Time) error {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	var readErr error
	for {
		hdr, name, data, err := nextFile(tr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		if err := addEntry(tree, hdr, name, data, newest); err != nil {
			// Stopped and reaped like a read error: no dpkg-deb is left behind.
			readErr = err
			break
		}
	}
	if readErr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return readErr
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile: %w: %s", err, stderr.Bytes())
	}
	return nil
}

// nextFile is the next entry of a package's tar that the root filesystem
// keeps (not excludedPath), with its clean name and its data; io.EOF after
// the last.
func nextFile(tr *tar.Reader) (*tar.Header, string, []byte, error) {
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil, "", nil, err
		}
		name := cleanName(hdr.Name)
		if name == "" || excludedPath(name) {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, "", nil, err
		}
		return hdr, name, data, nil
	}
}

// addEntry puts a package's file (hdr, named name, holding data) into
// tree with a header of its own, and keeps newest the latest time of
// those files. A directory an earlier package made stays as it is.
func addEntry(tree map[string]*entry, hdr *tar.Header, name string, data []byte, newest *time.Time) error {
	h := &tar.Header{
		Typeflag: hdr.Typeflag,
		Name:     name,
		Linkname: hdr.Linkname,
		Mode:     hdr.Mode,
		Uid:      hdr.Uid,
		Gid:      hdr.Gid,
		Size:     int64(len(data)),
		ModTime:  hdr.ModTime,
		Format:   tar.FormatPAX,
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		h.Name += "/"
		h.Size = 0
		if _, ok := tree[h.Name]; ok {
			return nil // an earlier package's directory: same path, keep it
		}
	case tar.TypeLink:
		h.Linkname = cleanName(hdr.Linkname)
		h.Size = 0
	case tar.TypeSymlink:
		h.Size = 0
	case tar.TypeReg:
	default:
		return fmt.Errorf("%s: unsupported tar entry type %q", hdr.Name, hdr.Typeflag)
	}
	if hdr.ModTime.After(*newest) {
		*newest = hdr.ModTime
	}
	tree[h.Name] = &entry{hdr: h, data: data}
	return nil
}

// excludedPaths are left out of the root filesystem as Debian's slim images
// leave them out (dpkg path-exclude): documentation, manual pages and
// translations nobody reads in a container. The copyright files stay.
var excludedPaths = []string{"usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/"}

func excludedPath(name string) bool {
	for _, prefix := range excludedPaths {
		if strings.HasPrefix(name, prefix) {
			return !strings.HasPrefix(name, "usr/share/doc/") || !(strings.HasSuffix(name, "/copyright") || strings.Count(name, "/") == 3)
		}
	}
	return false
}

// cleanName turns "./usr/bin/x" into "usr/bin/x" and "./" into "".
func cleanName(n string) string {
	n = strings.TrimPrefix(strings.TrimPrefix(n, "."), "/")
	return strings.TrimSuffix(n, "/")
}

// dpkgStatus turns a package's control fields into its stanza of
// /var/lib/dpkg/status.
func dpkgStatus(control []byte) []byte {
	control = bytes.TrimRight(control, "\n")
	first, rest, _ := bytes.Cut(control, []byte("\n"))
	var b bytes.Buffer
	b.Write(first)
	b.WriteString("\nStatus: install ok installed\n")
	if len(rest) > 0 {
		b.Write(rest)
		b.WriteString("\n")
	}
	return b.Bytes()
}

// generatedFiles are what the packages' maintainer scripts and a base
// system would have left that the image needs.
func generatedFiles(tree map[string]*entry, users []systemUser, status []byte) []*entry {
	var passwd, group strings.Builder
	groups := map[int]string{}
	for gid, name := range baseGroups {
		groups[gid] = name
	}
	all := append(slices.Clone(baseUsers), users...)
	for _, u := range all {
		fmt.Fprintf(&passwd, "%s:x:%d:%d:%s:%s:/usr/sbin/nologin\n", u.Name, u.UID, u.GID, u.Name, u.Home)
		if _, ok := groups[u.GID]; !ok {
			groups[u.GID] = u.Name
		}
	}
	gids := make([]int, 0, len(groups))
	for gid := range groups {
		gids = append(gids, gid)
	}
	slices.Sort(gids)
	for _, gid := range gids {
		fmt.Fprintf(&group, "%s:x:%d:\n", groups[gid], gid)
	}
	reg := func(name string, mode int64, data string) *entry {
		return &entry{hdr: &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: []byte(data)}
	}
	dir := func(name string, mode int64) *entry {
		return &entry{hdr: &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}}
	}
	files := []*entry{
		dir("etc", 0o755),
		reg("etc/passwd", 0o644, passwd.String()),
		reg("etc/group", 0o644, group.String()),
		dir("root", 0o700),
		dir("run", 0o755),
		dir("tmp", 0o1777),
		dir("var", 0o755),
		dir("var/lib", 0o755),
		dir("var/lib/dpkg", 0o755),
		reg("var/lib/dpkg/status", 0o644, string(status)),
		dir("var/tmp", 0o1777),
		{hdr: &tar.Header{Typeflag: tar.TypeSymlink, Name: "var/run", Linkname: "/run", Mode: 0o777}},
		// What a Debian system has and programs read to list mounts
		// (Ganesha's VFS backend, to find an export's file system).
		{hdr: &tar.Header{Typeflag: tar.TypeSymlink, Name: "etc/mtab", Linkname: "../proc/self/mounts", Mode: 0o777}},
	}
	if _, ok := tree["etc/nsswitch.conf"]; !ok {
		files = append(files, reg("etc/nsswitch.conf", 0o644, "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"))
	}
	return files
}

// writeTree writes tree sorted by name into out (through a temporary file,
// so that an interrupted build leaves nothing behind).
func writeTree(out string, tree map[string]*entry) (retErr error) {
	names := make([]string, 0, len(tree))
	for n := range tree {
		names = append(names, n)
	}
	slices.Sort(names)
	tmp, err := os.CreateTemp(filepath.Dir(out), ".rootfs-*")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	zw, err := gzip.NewWriterLevel(tmp, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, n := range names {
		e := tree[n]
		if err := tw.WriteHeader(e.hdr); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if e.hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
	}
	if err := errors.Join(tw.Close(), zw.Close(), tmp.Chmod(0o644), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
