// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command modproxy writes a Go module proxy directory (GOPROXY=file://<dir>)
// holding every release tag <dir>/vX.Y.Z of a git repository: the files a
// proxy serves (list, .info, .mod, .zip), the zip made from the tagged commit
// with golang.org/x/mod/zip, as a proxy fetching the tag would make it. Go
// then resolves a module's released requirement of a sibling (lib v0.1.0)
// exactly as a user's go command does, without the network.
//
//	modproxy -repo . -out _output/modproxy lib hostpath
//
// With -releases, the releases are the lines "<dir>/<version> <commit>" of
// that file (hack/tags.sh --list: the release ledger, which a clone has even
// without tags) instead of the repository's tags.
package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the git repository whose tags are published")
	out := flag.String("out", "_output/modproxy", "the proxy directory to write")
	releases := flag.String("releases", "", `a file of lines "<dir>/<version> <commit>" to publish instead of the repository's tags`)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-repo dir] [-out dir] <module dir>...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx := context.Background()
	refs, err := releaseRefs(ctx, *repo, *releases, flag.Args())
	if err == nil {
		err = writeProxy(ctx, *repo, *out, flag.Args(), refs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// releaseRefs maps each release <dir>/<version> of dirs to the revision to
// publish it from: its commit in the releases file, else the tag itself.
func releaseRefs(ctx context.Context, repo, releases string, dirs []string) (map[string]string, error) {
	refs := map[string]string{}
	if releases == "" {
		for _, dir := range dirs {
			tags, err := git(ctx, repo, "tag", "--list", dir+"/v*")
			if err != nil {
				return nil, err
			}
			for _, tag := range strings.Fields(tags) {
				refs[tag] = tag
			}
		}
		return refs, nil
	}
	data, err := os.ReadFile(releases) //nolint:gosec // the file named on the command line
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch len(fields) {
		case 0:
		case 2:
			refs[fields[0]] = fields[1]
		default:
			return nil, fmt.Errorf("%s:%d: want \"<dir>/<version> <commit>\", got %q", releases, i+1, line)
		}
	}
	return refs, nil
}

// writeProxy publishes every release of each module directory into out;
// refs maps a release's tag name to the revision to publish it from.
func writeProxy(ctx context.Context, repo, out string, dirs []string, refs map[string]string) error {
	for _, dir := range dirs {
		var versions []string
		modPath := ""
		for tag, rev := range refs {
			version, ok := strings.CutPrefix(tag, dir+"/")
			if !ok || !semver.IsValid(version) || semver.Canonical(version) != version {
				continue // another module's, or not a release tag
			}
			p, err := publish(ctx, repo, out, dir, rev, version)
			if err != nil {
				return fmt.Errorf("publishing %s: %w", tag, err)
			}
			modPath, versions = p, append(versions, version)
		}
		if modPath == "" {
			continue
		}
		semver.Sort(versions)
		if err := writeFile(filepath.Join(out, escape(modPath), "@v", "list"), []byte(strings.Join(versions, "\n")+"\n")); err != nil {
			return err
		}
	}
	return nil
}

// publish writes the .mod, .info and .zip of one release, tag naming its
// revision, and returns the module path that its go.mod declares.
func publish(ctx context.Context, repo, out, dir, tag, version string) (string, error) {
	goMod, err := git(ctx, repo, "show", tag+":"+path.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	modPath := modfile.ModulePath([]byte(goMod))
	if modPath == "" {
		return "", fmt.Errorf("%s:%s/go.mod declares no module", tag, dir)
	}
	base := filepath.Join(out, escape(modPath), "@v")
	zipPath := filepath.Join(base, version+".zip")
	// Tags do not move, so an existing zip is the same zip.
	if _, err := os.Stat(zipPath); err == nil {
		return modPath, nil
	}
	commitTime, err := git(ctx, repo, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return "", err
	}
	info, err := json.Marshal(struct{ Version, Time string }{version, strings.TrimSpace(commitTime)})
	if err != nil {
		return "", err
	}
	if err := writeFile(filepath.Join(base, version+".mod"), []byte(goMod)); err != nil {
		return "", err
	}
	if err := writeFile(filepath.Join(base, version+".info"), info); err != nil {
		return "", err
	}
	files, err := taggedFiles(ctx, repo, tag, dir)
	if err != nil {
		return "", err
	}
	var zip bytes.Buffer
	if err := modzip.Create(&zip, module.Version{Path: modPath, Version: version}, files); err != nil {
		return "", err
	}
	// The zip last: its presence marks the version complete.
	return modPath, writeFile(zipPath, zip.Bytes())
}

// taggedFiles are the files a proxy puts into the module zip of dir at tag:
// what `git archive` gives (so export-ignore and line endings are as a
// proxy sees them), plus the repository's LICENSE when dir has none, as the
// go command and public proxies add it. Not modzip.CreateFromVCS: it
// refuses a git worktree (a .git file, not a directory).
func taggedFiles(ctx context.Context, repo, tag, dir string) ([]modzip.File, error) {
	archive, err := gitBytes(ctx, repo, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", tag, dir)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, fmt.Errorf("reading git archive of %s: %w", tag, err)
	}
	var files []modzip.File
	hasLicense := false
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, dir+"/")
		if !ok || name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		files = append(files, archived{name: name, f: f})
		hasLicense = hasLicense || name == "LICENSE"
	}
	if !hasLicense {
		license, err := gitBytes(ctx, repo, "cat-file", "blob", tag+":LICENSE")
		if err == nil {
			files = append(files, inMemory{name: "LICENSE", data: license})
		}
	}
	return files, nil
}

// archived is a file of the git archive.
type archived struct {
	name string
	f    *zip.File
}

func (a archived) Path() string                 { return a.name }
func (a archived) Lstat() (os.FileInfo, error)  { return a.f.FileInfo(), nil }
func (a archived) Open() (io.ReadCloser, error) { return a.f.Open() }

// inMemory is a file added to the archive's.
type inMemory struct {
	name string
	data []byte
}

func (m inMemory) Path() string { return m.name }
func (m inMemory) Lstat() (os.FileInfo, error) {
	return memInfo{name: m.name, size: int64(len(m.data))}, nil
}
func (m inMemory) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(m.data)), nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

func escape(modPath string) string {
	escaped, err := module.EscapePath(modPath)
	if err != nil {
		return modPath // a path go.mod accepted is escapable; keep it readable if not
	}
	return escaped
}

// writeFile writes through a temporary file, so that a concurrent go
// command never reads half a file.
func writeFile(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), name)
}

func git(ctx context.Context, repo string, args ...string) (string, error) {
	out, err := gitBytes(ctx, repo, args...)
	return string(out), err
}

func gitBytes(ctx context.Context, repo string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", slices.Concat([]string{"-C", repo}, args)...) //nolint:gosec // running git on the repository given is what this tool does
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
