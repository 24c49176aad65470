// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"maps"
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
}

// Collect implements prometheus.Collector.
func (c *BudgetCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	for _, np := range p.servedPaths() {
		scope, _ := volumeScope(np.node, np.paths.Shared != "")
		node := np.node
		if np.paths.Shared != "" {
			node = ""
		}
		budgets, err := p.budgets(np.paths, np.node, scope, np.roots, "")
		if err != nil {
			ch <- prometheus.NewInvalidMetric(capacityDesc, err)
			continue
		}
		for _, b := range budgets {
			if b.known() {
				ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(b.capacity), node, b.root)
			}
			ch <- prometheus.MustNewConstMetric(allocatedDesc, prometheus.GaugeValue, float64(b.allocated), node, b.root)
		}
	}
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
