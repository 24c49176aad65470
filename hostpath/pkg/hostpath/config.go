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

	"k8s.io/apimachinery/pkg/api/resource"
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
	// SharedFileSystemCapacity is ours: the budget of the
	// sharedFileSystemPath, a quantity such as "500Gi".
	SharedFileSystemCapacity string `json:"sharedFileSystemCapacity"`
	// EnforceCapacity is ours: whether volumes get a size limit equal to
	// their request (EnforceAuto, EnforceAlways, EnforceNever).
	EnforceCapacity string `json:"enforceCapacity"`
}

// The values of enforceCapacity.
const (
	// EnforceAuto, the default, limits each volume's size where its
	// path's filesystem can (btrfs with quotas), and only accounts it
	// elsewhere.
	EnforceAuto = "auto"
	// EnforceAlways refuses to make a volume on a path whose filesystem
	// cannot limit it.
	EnforceAlways = "always"
	// EnforceNever makes plain directories everywhere.
	EnforceNever = "never"
)

type nodePaths struct {
	Node  string   `json:"node"`
	Paths []string `json:"paths"`
	// PathCapacity is ours: the budget of some of Paths, by path, as
	// quantities ("500Gi"); a path without one has its filesystem's size.
	PathCapacity map[string]string `json:"pathCapacity"`
}

// PathMap is a checked configuration: where volumes go on each node, or the
// one filesystem every node mounts at the same path; or, from
// storageClassConfigs, one such configuration per StorageClass (ForClass).
type PathMap struct {
	// Shared is the sharedFileSystemPath; when set, nodes is empty.
	Shared string
	nodes  map[string][]string
	// capacities are the configured budgets, in bytes, by node (or
	// DefaultNode) and path; sharedCapacity is Shared's (0: none).
	capacities     map[string]map[string]int64
	sharedCapacity int64
	// Enforce is enforceCapacity, EnforceAuto when not given.
	Enforce string
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
	return &PathMap{nodes: map[string][]string{DefaultNode: {filepath.Clean(dir)}}, Enforce: EnforceAuto}
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

// CapacityOf returns the configured budget of path on node in bytes, and
// false when the configuration sets none (the filesystem's size is then
// the budget).
func (m *PathMap) CapacityOf(node, path string) (int64, bool) {
	if m.Shared != "" {
		return m.sharedCapacity, m.sharedCapacity > 0 && path == m.Shared
	}
	entry := node
	if _, listed := m.nodes[node]; !listed {
		entry = DefaultNode
	}
	c, ok := m.capacities[entry][path]
	return c, ok
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
			return nil, fmt.Errorf("%w: unknown key %s: hostpath-provisioner understands nodePathMap (node, paths, pathCapacity), sharedFileSystemPath, sharedFileSystemCapacity, enforceCapacity, storageClassConfigs, setupCommand, teardownCommand and cmdTimeoutSeconds", ErrConfig, field)
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
	if fc.SharedFileSystemCapacity != "" || fc.EnforceCapacity != "" {
		return nil, fmt.Errorf("%w: with storageClassConfigs, sharedFileSystemCapacity and enforceCapacity go into the classes' entries", ErrConfig)
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
	m, errs := parseLocations(cp, where)
	enforce, err := parseEnforce(cp.EnforceCapacity)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s%w", where, err))
	}
	if m != nil {
		m.Enforce = enforce
	}
	return m, errs
}

// parseEnforce reads enforceCapacity; empty is EnforceAuto.
func parseEnforce(v string) (string, error) {
	switch v {
	case "":
		return EnforceAuto, nil
	case EnforceAuto, EnforceAlways, EnforceNever:
		return v, nil
	}
	return "", fmt.Errorf("enforceCapacity %q must be %s, %s or %s", v, EnforceAuto, EnforceAlways, EnforceNever)
}

// parseLocations checks one nodePathMap or sharedFileSystemPath.
func parseLocations(cp classPaths, where string) (*PathMap, []error) {
	if cp.SharedFileSystemPath != "" {
		if len(cp.NodePathMap) > 0 {
			return nil, []error{fmt.Errorf("%snodePathMap and sharedFileSystemPath exclude each other: set nodePathMap to [] to use sharedFileSystemPath", where)}
		}
		if err := checkPath(cp.SharedFileSystemPath); err != nil {
			return nil, []error{fmt.Errorf("%ssharedFileSystemPath %w", where, err)}
		}
		m := &PathMap{Shared: filepath.Clean(cp.SharedFileSystemPath)}
		if cp.SharedFileSystemCapacity != "" {
			c, err := parseCapacity(cp.SharedFileSystemCapacity)
			if err != nil {
				return nil, []error{fmt.Errorf("%ssharedFileSystemCapacity %w", where, err)}
			}
			m.sharedCapacity = c
		}
		return m, nil
	}
	if len(cp.NodePathMap) == 0 {
		return nil, []error{fmt.Errorf("%sneither nodePathMap nor sharedFileSystemPath is set", where)}
	}
	if cp.SharedFileSystemCapacity != "" {
		return nil, []error{fmt.Errorf("%ssharedFileSystemCapacity is set without a sharedFileSystemPath: give each node path its budget with pathCapacity", where)}
	}
	var errs []error
	m := &PathMap{nodes: map[string][]string{}, capacities: map[string]map[string]int64{}}
	for _, np := range cp.NodePathMap {
		if np.Node == "" {
			errs = append(errs, fmt.Errorf("%sa nodePathMap entry has no node: name a node or %s", where, DefaultNode))
			continue
		}
		if _, dup := m.nodes[np.Node]; dup {
			errs = append(errs, fmt.Errorf("%snode %s is listed twice in nodePathMap", where, np.Node))
			continue
		}
		paths, pathErrs := parseNodePaths(np, where)
		errs = append(errs, pathErrs...)
		m.nodes[np.Node] = paths
		caps, capErrs := parsePathCapacity(np, paths, where)
		errs = append(errs, capErrs...)
		m.capacities[np.Node] = caps
	}
	return m, errs
}

// parseNodePaths checks and cleans the paths of one nodePathMap entry.
func parseNodePaths(np nodePaths, where string) ([]string, []error) {
	var errs []error
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
	return paths, errs
}

// parsePathCapacity reads the budgets of one nodePathMap entry: each must
// be of one of its paths (a typo would otherwise leave a path unbudgeted).
func parsePathCapacity(np nodePaths, paths []string, where string) (map[string]int64, []error) {
	var errs []error
	caps := map[string]int64{}
	for _, p := range slices.Sorted(maps.Keys(np.PathCapacity)) {
		clean := filepath.Clean(p)
		if !slices.Contains(paths, clean) {
			errs = append(errs, fmt.Errorf("%snode %s: pathCapacity names %q, which is not one of its paths %v", where, np.Node, p, paths))
			continue
		}
		c, err := parseCapacity(np.PathCapacity[p])
		if err != nil {
			errs = append(errs, fmt.Errorf("%snode %s: pathCapacity of %s %w", where, np.Node, clean, err))
			continue
		}
		caps[clean] = c
	}
	return caps, errs
}

// parseCapacity reads a budget: a positive quantity of bytes, as a claim
// writes its request.
func parseCapacity(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a quantity (write it as a claim's request, e.g. \"500Gi\"): %w", s, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("%q must be more than zero", s)
	}
	return q.Value(), nil
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
