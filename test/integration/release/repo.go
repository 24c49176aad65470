// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package release tests how the repository is released: tags from
// versions.yaml (hack/release.sh), binary versions and image tags from
// hack/build.make, lib as a third party consumes it, and lib's API
// compatibility check (hack/apidiff.sh). This file also offers the facts
// about the repository that the images and deploy tests share.
package release

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Root finds the repository root (the directory with versions.yaml and
// go.work) from the working directory upwards.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "versions.yaml")) && fileExists(filepath.Join(dir, "go.work")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no versions.yaml and go.work in any parent directory")
		}
		dir = parent
	}
}

// Module is one entry of versions.yaml.
type Module struct {
	Dir     string // also the tag prefix: <dir>/<version>
	Version string // the next release
}

var versionLine = regexp.MustCompile(`^([a-z][a-z0-9-]*):\s*(\S+)`)

// Versions reads versions.yaml in its order.
func Versions(root string) ([]Module, error) {
	data, err := os.ReadFile(filepath.Join(root, "versions.yaml"))
	if err != nil {
		return nil, err
	}
	var mods []Module
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := versionLine.FindStringSubmatch(sc.Text()); m != nil {
			mods = append(mods, Module{Dir: m[1], Version: m[2]})
		}
	}
	if len(mods) == 0 {
		return nil, errors.New("versions.yaml lists no module")
	}
	return mods, sc.Err()
}

// Version is the next version of dir in versions.yaml.
func Version(root, dir string) (string, error) {
	mods, err := Versions(root)
	if err != nil {
		return "", err
	}
	for _, m := range mods {
		if m.Dir == dir {
			return m.Version, nil
		}
	}
	return "", fmt.Errorf("versions.yaml has no module %s", dir)
}

// Provisioner is a directory whose Makefile includes hack/build.make.
type Provisioner struct {
	Dir    string // relative to the root, e.g. hostpath
	Binary string // BINARY in its Makefile; built from <dir>/cmd/<binary>
}

var binaryLine = regexp.MustCompile(`(?m)^BINARY\s*:?=\s*(\S+)\s*$`)

// Provisioners lists, in versions.yaml order, the released modules that have
// a cmd/ directory and a Makefile including hack/build.make. A module with
// cmd/ but no such Makefile is returned in missing, so that a test can say
// which provisioner cannot be built yet.
func Provisioners(root string) (found []Provisioner, missing []string, err error) {
	mods, err := Versions(root)
	if err != nil {
		return nil, nil, err
	}
	for _, mod := range mods {
		if !dirExists(filepath.Join(root, mod.Dir, "cmd")) {
			continue
		}
		makefile, err := os.ReadFile(filepath.Join(root, mod.Dir, "Makefile"))
		if errors.Is(err, os.ErrNotExist) || (err == nil && !bytes.Contains(makefile, []byte("hack/build.make"))) {
			missing = append(missing, mod.Dir)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		m := binaryLine.FindSubmatch(makefile)
		if m == nil {
			return nil, nil, fmt.Errorf("%s/Makefile sets no BINARY", mod.Dir)
		}
		found = append(found, Provisioner{Dir: mod.Dir, Binary: string(m[1])})
	}
	return found, missing, nil
}

// Run runs a command in dir with extra environment variables and returns its
// standard output; on failure the error carries the combined output.
func Run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, combined bytes.Buffer
	cmd.Stdout = io.MultiWriter(&stdout, &combined)
	cmd.Stderr = &combined
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s in %s: %w\n%s", name, strings.Join(args, " "), dir, err, tail(combined.String(), 60))
	}
	return stdout.String(), nil
}

// tail keeps the last n lines: the error of a failed build is at the end.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Release is one entry of releases.yaml, the release ledger.
type Release struct {
	Module  string
	Version string
	Commit  string // full hash
	Lib     string // for a provisioner, the lib version its go.mod requires
}

// Tag is the release's tag name, <module>/<version>.
func (r Release) Tag() string { return r.Module + "/" + r.Version }

var ledgerLine = regexp.MustCompile(`^- \{module: ([a-z][a-z0-9-]*), version: (v[^,} ]+), commit: ([0-9a-f]{40})(?:, lib: (v[^,} ]+))?\}\s*$`)

// Ledger reads releases.yaml in its order; a line that is no entry, comment
// or blank is an error, as hack/tags.sh has it.
func Ledger(root string) ([]Release, error) {
	data, err := os.ReadFile(filepath.Join(root, "releases.yaml"))
	if err != nil {
		return nil, err
	}
	var releases []Release
	for i, line := range strings.Split(string(data), "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		m := ledgerLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("releases.yaml:%d: not a release entry: %q", i+1, line)
		}
		releases = append(releases, Release{Module: m[1], Version: m[2], Commit: m[3], Lib: m[4]})
	}
	return releases, nil
}
