// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"maps"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// The budget gauges, per node path (node is empty for the shared file
// system). They are computed at each scrape from the configuration and the
// cached PVs: no API call.
var (
	capacityDesc = prometheus.NewDesc("hostpath_path_capacity_bytes",
		"The budget of a node path: its pathCapacity or sharedFileSystemCapacity, else its filesystem's size (absent when neither is known).",
		[]string{"node", "path"}, nil)
	allocatedDesc = prometheus.NewDesc("hostpath_path_allocated_bytes",
		"The capacity of the volumes on a node path, and of those being created or expanded there.",
		[]string{"node", "path"}, nil)
	usedDesc = prometheus.NewDesc("hostpath_path_used_bytes",
		"What the size-limited volumes on a node path hold (btrfs qgroups, as of the last commit); absent where no volume is limited.",
		[]string{"node", "path"}, nil)
)

// BudgetCollector reports the budgets of the node paths this instance
// serves.
type BudgetCollector struct{ p *Provisioner }

// Collector returns the Prometheus collector of p's budgets.
func (p *Provisioner) Collector() *BudgetCollector { return &BudgetCollector{p: p} }

var _ prometheus.Collector = (*BudgetCollector)(nil)

// Describe implements prometheus.Collector.
func (c *BudgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- capacityDesc
	ch <- allocatedDesc
	ch <- usedDesc
}

// Collect implements prometheus.Collector.
func (c *BudgetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, sp := range c.p.servedPaths() {
		node := sp.node
		if sp.paths.Shared != "" {
			node = ""
		}
		budgets, err := c.p.lockedBudgets(sp)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(capacityDesc, err)
			continue
		}
		for _, b := range budgets {
			if b.known() {
				ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(b.capacity), node, b.root)
			}
			ch <- prometheus.MustNewConstMetric(allocatedDesc, prometheus.GaugeValue, float64(b.allocated), node, b.root)
			if used, ok := c.p.usedOn(sp, b.root); ok {
				ch <- prometheus.MustNewConstMetric(usedDesc, prometheus.GaugeValue, float64(used), node, b.root)
			}
		}
	}
}

// lockedBudgets are the budgets of sp's roots.
func (p *Provisioner) lockedBudgets(sp servedPath) ([]pathBudget, error) {
	scope, _ := volumeScope(sp.node, sp.paths.Shared != "")
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	return p.budgets(sp.paths, sp.node, scope, sp.roots, "")
}

// usedOn is what the size-limited volumes on root hold, and false when
// none of them is limited (used bytes are known only for those).
func (p *Provisioner) usedOn(sp servedPath, root string) (int64, bool) {
	limiter, ok := p.cfg.Dirs.(Limiter)
	if !ok {
		return 0, false
	}
	pvs, err := p.listVolumes()
	if err != nil {
		return 0, false
	}
	scope, _ := volumeScope(sp.node, sp.paths.Shared != "")
	var total int64
	var limited bool
	for _, pv := range pvs {
		s, _ := volumeScope(pv.Annotations[AnnNode], pv.Annotations[AnnShared] == "true")
		if s != scope || rootUnder([]string{root}, volumePathOf(pv)) == "" {
			continue
		}
		rel, err := filepath.Rel(root, volumePathOf(pv))
		if err != nil {
			continue
		}
		if used, ok, err := limiter.UsedBytes(root, rel); err == nil && ok {
			total, limited = total+used, true
		}
	}
	return total, limited
}

// servedPath is the paths of one node (or of the shared file system) under
// one class's configuration.
type servedPath struct {
	node  string
	paths *PathMap
	roots []string
}

// servedPaths are the node paths this instance makes volumes on, each
// once: its own node's, and every node's it serves (those the
// configuration names, and those its PVs are on).
func (p *Provisioner) servedPaths() []servedPath {
	m := p.Paths()
	classes := []*PathMap{m}
	if m.classes != nil {
		classes = nil
		for _, name := range slices.Sorted(maps.Keys(m.classes)) {
			classes = append(classes, m.classes[name])
		}
	}
	seen := map[[2]string]bool{}
	var out []servedPath
	for _, c := range classes {
		for _, node := range p.servedNodes(c) {
			roots, _ := c.PathsFor(node)
			var fresh []string
			for _, r := range roots {
				key := [2]string{node, r}
				if c.Shared != "" {
					key[0] = ""
				}
				if !seen[key] {
					seen[key] = true
					fresh = append(fresh, r)
				}
			}
			if len(fresh) > 0 {
				out = append(out, servedPath{node: node, paths: c, roots: fresh})
			}
		}
	}
	return out
}

// servedNodes are the nodes whose paths of c this instance reports.
func (p *Provisioner) servedNodes(c *PathMap) []string {
	if c.Shared != "" || !p.servesEveryNode(false) {
		return []string{p.cfg.Node}
	}
	nodes := map[string]bool{}
	for n := range c.nodes {
		if n != DefaultNode {
			nodes[n] = true
		}
	}
	pvs, _ := p.listVolumes()
	for _, pv := range pvs {
		if pv.Annotations[AnnShared] != "true" {
			nodes[pv.Annotations[AnnNode]] = true
		}
	}
	return slices.Sorted(maps.Keys(nodes))
}
