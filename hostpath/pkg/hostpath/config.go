// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// DefaultNode is the nodePathMap entry for every node not listed by name,
// spelled as in rancher/local-path-provisioner's config.json.
const DefaultNode = "DEFAULT_PATH_FOR_NON_LISTED_NODES"

// DefaultReloadInterval is how often the configuration file is read again.
const DefaultReloadInterval = 10 * time.Second

// ErrConfig marks every error of a configuration file.
var ErrConfig = errors.New("invalid configuration")

// fileConfig is config.json as written: the shape of local-path's.
type fileConfig struct {
	NodePathMap          []nodePaths `json:"nodePathMap"`
	SharedFileSystemPath string      `json:"sharedFileSystemPath"`
}

type nodePaths struct {
	Node  string   `json:"node"`
	Paths []string `json:"paths"`
}

// PathMap is a checked configuration: where volumes go on each node, or the
// one filesystem every node mounts at the same path.
type PathMap struct {
	// Shared is the sharedFileSystemPath; when set, nodes is empty.
	Shared string
	nodes  map[string][]string
}

// SinglePath is the configuration of --pv-dir alone: one path on every node.
func SinglePath(dir string) *PathMap {
	return &PathMap{nodes: map[string][]string{DefaultNode: {filepath.Clean(dir)}}}
}

// PathsFor returns the paths volumes may use on node, and false when node is
// refused (listed with no paths, or not listed and there is no default).
func (m *PathMap) PathsFor(node string) ([]string, bool) {
	if m.Shared != "" {
		return []string{m.Shared}, true
	}
	paths, listed := m.nodes[node]
	if !listed {
		paths = m.nodes[DefaultNode]
	}
	return paths, len(paths) > 0
}

// AllPaths returns every configured path, sorted, for helper pods and
// deletion checks.
func (m *PathMap) AllPaths() []string {
	if m.Shared != "" {
		return []string{m.Shared}
	}
	var all []string
	for _, paths := range m.nodes {
		all = append(all, paths...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// ParseConfig reads config.json: unknown keys, relative paths, "/", duplicate
// nodes and paths, and a nodePathMap together with a sharedFileSystemPath are
// refused with a message naming what to change.
func ParseConfig(data []byte) (*PathMap, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc fileConfig
	if err := dec.Decode(&fc); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("%w: unknown key %s: hostpath-provisioner understands nodePathMap and sharedFileSystemPath", ErrConfig, field)
		}
		return nil, fmt.Errorf("%w: not valid JSON: %w", ErrConfig, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON object", ErrConfig)
	}
	var errs []error
	if fc.SharedFileSystemPath != "" {
		if len(fc.NodePathMap) > 0 {
			return nil, fmt.Errorf("%w: nodePathMap and sharedFileSystemPath exclude each other: set nodePathMap to [] to use sharedFileSystemPath", ErrConfig)
		}
		if err := checkPath(fc.SharedFileSystemPath); err != nil {
			return nil, fmt.Errorf("%w: sharedFileSystemPath %w", ErrConfig, err)
		}
		return &PathMap{Shared: filepath.Clean(fc.SharedFileSystemPath)}, nil
	}
	if len(fc.NodePathMap) == 0 {
		return nil, fmt.Errorf("%w: neither nodePathMap nor sharedFileSystemPath is set", ErrConfig)
	}
	m := &PathMap{nodes: map[string][]string{}}
	for _, np := range fc.NodePathMap {
		if np.Node == "" {
			errs = append(errs, fmt.Errorf("a nodePathMap entry has no node: name a node or %s", DefaultNode))
			continue
		}
		if _, dup := m.nodes[np.Node]; dup {
			errs = append(errs, fmt.Errorf("node %s is listed twice in nodePathMap", np.Node))
			continue
		}
		paths := []string{}
		for _, p := range np.Paths {
			if err := checkPath(p); err != nil {
				errs = append(errs, fmt.Errorf("node %s: path %w", np.Node, err))
				continue
			}
			p = filepath.Clean(p)
			if slices.Contains(paths, p) {
				errs = append(errs, fmt.Errorf("node %s: path %s is listed twice", np.Node, p))
				continue
			}
			paths = append(paths, p)
		}
		m.nodes[np.Node] = paths
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return m, nil
}

func checkPath(p string) error {
	switch {
	case !filepath.IsAbs(p):
		return fmt.Errorf("%q must be absolute (start with /)", p)
	case filepath.Clean(p) == "/":
		return fmt.Errorf("%q is the root directory: give a directory for volumes", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q contains a NUL byte", p)
	}
	return nil
}

// LoadConfig reads and checks the configuration file at path.
func LoadConfig(path string) (*PathMap, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	m, err := ParseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, data, nil
}

// WatchConfig reads cfg.ConfigFile again every cfg.ReloadInterval until ctx
// ends (a mounted ConfigMap changes in place, through a symlink swap). A
// changed, valid file replaces the configuration; an invalid one is logged
// and the last valid configuration stays in use. It returns at once without
// a configuration file.
func (p *Provisioner) WatchConfig(ctx context.Context) {
	if p.cfg.ConfigFile == "" {
		return
	}
	logger := klog.FromContext(ctx).WithValues("config", p.cfg.ConfigFile)
	last := p.rawConfig
	var lastErr string
	t := time.NewTicker(p.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, data, err := LoadConfig(p.cfg.ConfigFile)
		if err != nil {
			if err.Error() != lastErr {
				logger.Error(err, "Keeping the last valid configuration")
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
		if bytes.Equal(data, last) {
			continue
		}
		last = data
		p.paths.Store(m)
		logger.Info("Applied configuration", "content", string(data))
	}
}
