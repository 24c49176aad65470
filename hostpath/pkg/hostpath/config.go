// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	classPaths
	// StorageClassConfigs gives each StorageClass, by name, paths of its
	// own; it excludes the top-level paths.
	StorageClassConfigs map[string]classPaths `json:"storageClassConfigs"`
	// The keys of local-path's setup and teardown (scripts.go).
	scriptKeys
}

// classPaths is where volumes go: on each node, or on one filesystem every
// node mounts.
type classPaths struct {
	NodePathMap          []nodePaths `json:"nodePathMap"`
	SharedFileSystemPath string      `json:"sharedFileSystemPath"`
}

type nodePaths struct {
	Node  string   `json:"node"`
	Paths []string `json:"paths"`
}

// PathMap is a checked configuration: where volumes go on each node, or the
// one filesystem every node mounts at the same path; or, from
// storageClassConfigs, one such configuration per StorageClass (ForClass).
type PathMap struct {
	// Shared is the sharedFileSystemPath; when set, nodes is empty.
	Shared  string
	nodes   map[string][]string
	classes map[string]*PathMap
	// Scripts are local-path's setup and teardown, if configured: the
	// same for every class.
	Scripts *Scripts
	keys    scriptKeys
}

// setScripts gives m and each of its classes s.
func (m *PathMap) setScripts(s *Scripts) {
	m.Scripts = s
	for _, c := range m.classes {
		c.Scripts = s
	}
}

// SinglePath is the configuration of --pv-dir alone: one path on every node.
func SinglePath(dir string) *PathMap {
	return &PathMap{nodes: map[string][]string{DefaultNode: {filepath.Clean(dir)}}}
}

// ForClass returns the paths of the volumes of StorageClass class: its
// storageClassConfigs entry, or m itself when there are none. A class the
// entries do not name is an error, as in local-path.
func (m *PathMap) ForClass(class string) (*PathMap, error) {
	if m.classes == nil {
		return m, nil
	}
	if c, ok := m.classes[class]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("StorageClass %q has no entry in config.json's storageClassConfigs (it has %s): add one, or use a class it lists",
		class, strings.Join(slices.Sorted(maps.Keys(m.classes)), ", "))
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

// AllPaths returns every configured path, of every class, sorted, for
// helper pods and deletion checks.
func (m *PathMap) AllPaths() []string {
	all := []string{}
	if m.Shared != "" {
		all = append(all, m.Shared)
	}
	for _, paths := range m.nodes {
		all = append(all, paths...)
	}
	for _, c := range m.classes {
		all = append(all, c.AllPaths()...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// ParseConfig reads config.json: unknown keys, relative paths, "/", duplicate
// nodes and paths, a nodePathMap together with a sharedFileSystemPath, and
// either beside storageClassConfigs are refused with a message naming what
// to change. Local-path's keys of its setup and teardown are checked by
// LoadConfig, together with the ConfigMap's files they go with.
func ParseConfig(data []byte) (*PathMap, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc fileConfig
	if err := dec.Decode(&fc); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("%w: unknown key %s: hostpath-provisioner understands nodePathMap, sharedFileSystemPath, storageClassConfigs, setupCommand, teardownCommand and cmdTimeoutSeconds", ErrConfig, field)
		}
		return nil, fmt.Errorf("%w: not valid JSON: %w", ErrConfig, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON object", ErrConfig)
	}
	if fc.StorageClassConfigs == nil {
		m, errs := parsePaths(fc.classPaths, "")
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		m.keys = fc.scriptKeys
		return m, nil
	}
	if len(fc.NodePathMap) > 0 || fc.SharedFileSystemPath != "" {
		return nil, fmt.Errorf("%w: storageClassConfigs excludes a top-level nodePathMap and sharedFileSystemPath: set nodePathMap to [], and move the paths into the classes' entries", ErrConfig)
	}
	if len(fc.StorageClassConfigs) == 0 {
		return nil, fmt.Errorf("%w: storageClassConfigs is empty: give an entry per StorageClass, or remove it and set nodePathMap", ErrConfig)
	}
	m := &PathMap{classes: map[string]*PathMap{}, keys: fc.scriptKeys}
	var errs []error
	for _, class := range slices.Sorted(maps.Keys(fc.StorageClassConfigs)) {
		c, classErrs := parsePaths(fc.StorageClassConfigs[class], fmt.Sprintf("storageClassConfigs[%q]: ", class))
		errs = append(errs, classErrs...)
		m.classes[class] = c
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return m, nil
}

// parsePaths checks one nodePathMap or sharedFileSystemPath; where prefixes
// its messages.
func parsePaths(cp classPaths, where string) (*PathMap, []error) {
	if cp.SharedFileSystemPath != "" {
		if len(cp.NodePathMap) > 0 {
			return nil, []error{fmt.Errorf("%snodePathMap and sharedFileSystemPath exclude each other: set nodePathMap to [] to use sharedFileSystemPath", where)}
		}
		if err := checkPath(cp.SharedFileSystemPath); err != nil {
			return nil, []error{fmt.Errorf("%ssharedFileSystemPath %w", where, err)}
		}
		return &PathMap{Shared: filepath.Clean(cp.SharedFileSystemPath)}, nil
	}
	if len(cp.NodePathMap) == 0 {
		return nil, []error{fmt.Errorf("%sneither nodePathMap nor sharedFileSystemPath is set", where)}
	}
	var errs []error
	m := &PathMap{nodes: map[string][]string{}}
	for _, np := range cp.NodePathMap {
		if np.Node == "" {
			errs = append(errs, fmt.Errorf("%sa nodePathMap entry has no node: name a node or %s", where, DefaultNode))
			continue
		}
		if _, dup := m.nodes[np.Node]; dup {
			errs = append(errs, fmt.Errorf("%snode %s is listed twice in nodePathMap", where, np.Node))
			continue
		}
		paths := []string{}
		for _, p := range np.Paths {
			if err := checkPath(p); err != nil {
				errs = append(errs, fmt.Errorf("%snode %s: path %w", where, np.Node, err))
				continue
			}
			p = filepath.Clean(p)
			if slices.Contains(paths, p) {
				errs = append(errs, fmt.Errorf("%snode %s: path %s is listed twice", where, np.Node, p))
				continue
			}
			paths = append(paths, p)
		}
		m.nodes[np.Node] = paths
	}
	return m, errs
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

// LoadConfig reads and checks the configuration file at path, and
// local-path's setup and teardown scripts and helperPod.yaml beside it (the
// other keys of its ConfigMap), which only helper pods run. The returned
// bytes are what a reload compares: all of them.
func LoadConfig(path string, helperPods bool) (*PathMap, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	m, err := ParseConfig(data)
	var s *Scripts
	if err == nil {
		s, err = loadScripts(path, m.keys, helperPods)
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	m.setScripts(s)
	if s != nil {
		// A changed script is a changed configuration.
		b, _ := json.Marshal(s)
		data = append(data, b...)
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
		m, data, err := LoadConfig(p.cfg.ConfigFile, p.anyNode)
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
