// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// ErrNoRoom: no path the volume may use has the budget left for it.
var ErrNoRoom = errors.New("no room")

// Sizer is what Dirs may also do: tell the size of the filesystem a path
// is on, the budget of a path the configuration gives none. LocalDirs can;
// helper pods cannot without a pod, so their paths are budgeted only when
// configured.
type Sizer interface {
	FilesystemSize(path string) (int64, error)
}

// A budget's numbers are what each path of a node has been promised: the
// capacity of every PV of this provisioner on it, read from the PVs (so a
// restart loses nothing), plus holds, the room taken by volumes whose PVs
// do not show it yet.
type ledger struct {
	mu    sync.Mutex
	holds map[string]map[string]hold // scope -> PV name -> hold
}

// hold is room taken for one PV on its candidate roots: while it is being
// created, on each path Dirs may choose; then on the one chosen until the
// PV appears; during an expansion, the increase until the PV shows it.
type hold struct {
	roots []string
	bytes int64
	// until ends the hold once the cached PV's capacity is at least this.
	until int64
}

// pathBudget is one path's budget as a claim's placement sees it.
type pathBudget struct {
	root      string
	capacity  int64 // bytes; 0 when unknown
	allocated int64
	source    string // where capacity comes from, for messages
}

func (b pathBudget) known() bool { return b.capacity > 0 }

func (b pathBudget) left() int64 { return max(b.capacity-b.allocated, 0) }

func (b pathBudget) String() string {
	if !b.known() {
		return fmt.Sprintf("%s has no known budget", b.root)
	}
	return fmt.Sprintf("%s has %s left of %s (%s)", b.root, bytesString(b.left()), bytesString(b.capacity), b.source)
}

// budgets are the budgets of roots of node, none counting pvName's own
// holds; the caller holds p.ledger.mu.
func (p *Provisioner) budgets(paths *PathMap, node, scope string, roots []string, pvName string) ([]pathBudget, error) {
	allocated, err := p.allocated(scope, roots, pvName)
	if err != nil {
		return nil, err
	}
	out := make([]pathBudget, 0, len(roots))
	for _, r := range roots {
		b := pathBudget{root: r, allocated: allocated[r]}
		b.capacity, b.source, err = p.capacityOf(paths, node, r)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// capacityOf is the budget of root on node: the configured one, else the
// size of its filesystem when Dirs can tell it, else 0 (unknown).
func (p *Provisioner) capacityOf(paths *PathMap, node, root string) (int64, string, error) {
	if c, ok := paths.CapacityOf(node, root); ok {
		return c, "its capacity in the configuration", nil
	}
	sizer, ok := p.cfg.Dirs.(Sizer)
	if !ok {
		return 0, "", nil
	}
	size, err := sizer.FilesystemSize(root)
	if err != nil {
		return 0, "", fmt.Errorf("path %s on node %s (check --pv-dir or the configuration, and the provisioner's hostPath mounts): %w", root, node, err)
	}
	return size, "the size of its filesystem", nil
}

// allocated sums, for each of roots, the capacity of the PVs of ours on it
// and the holds of scope, leaving out the PV named except and its hold; it
// ends the holds the PVs now show.
func (p *Provisioner) allocated(scope string, roots []string, except string) (map[string]int64, error) {
	out := map[string]int64{}
	pvs, err := p.listVolumes()
	if err != nil {
		return nil, err
	}
	cached := map[string]int64{}
	for _, pv := range pvs {
		s, _ := volumeScope(pv.Annotations[AnnNode], pv.Annotations[AnnShared] == "true")
		if s != scope {
			continue
		}
		size := volumeCapacity(pv)
		cached[pv.Name] = size
		if r := rootUnder(roots, volumePathOf(pv)); r != "" && pv.Name != except {
			out[r] += size
		}
	}
	for name, h := range p.ledger.holds[scope] {
		if size, ok := cached[name]; ok && size >= h.until {
			delete(p.ledger.holds[scope], name)
			continue
		}
		if name == except {
			continue
		}
		for _, r := range h.roots {
			out[r] += h.bytes
		}
	}
	return out, nil
}

// listVolumes lists the PVs of this provisioner, or none without a lister.
func (p *Provisioner) listVolumes() ([]*corev1.PersistentVolume, error) {
	if p.cfg.Volumes == nil {
		return nil, nil
	}
	pvs, err := p.cfg.Volumes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumes: %w", err)
	}
	ours := pvs[:0:0]
	for _, pv := range pvs {
		if pv.Annotations[AnnNode] != "" && volumePathOf(pv) != "" {
			ours = append(ours, pv)
		}
	}
	return ours, nil
}

// placeVolume chooses where a new volume of size bytes may go among roots
// and holds its room there until the PV shows it: the roots with a known
// budget that have the most room left (several only when they tie, as
// directories on one filesystem do); else, when only roots of unknown
// budget remain, those. Dirs then chooses among them by free space. It
// returns ErrNoRoom, naming every root's numbers, when nothing fits.
func (p *Provisioner) placeVolume(paths *PathMap, node, scope string, roots []string, pvName string, size int64) ([]string, error) {
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	budgets, err := p.budgets(paths, node, scope, roots, pvName)
	if err != nil {
		return nil, err
	}
	chosen := mostRoom(budgets, size)
	if len(chosen) == 0 {
		return nil, noRoomError(node, scope, size, budgets)
	}
	p.holdLocked(scope, pvName, hold{roots: chosen, bytes: size, until: size})
	return chosen, nil
}

// mostRoom are the roots of known budget with the most room left, if it
// is at least size; else those of unknown budget.
func mostRoom(budgets []pathBudget, size int64) []string {
	var best, unknown []string
	most := int64(-1)
	for _, b := range budgets {
		switch {
		case !b.known():
			unknown = append(unknown, b.root)
		case b.left() < size:
		case b.left() > most:
			best, most = []string{b.root}, b.left()
		case b.left() == most:
			best = append(best, b.root)
		}
	}
	if len(best) > 0 {
		return best
	}
	return unknown
}

// noRoomError says which paths were tried and what each has left.
func noRoomError(node, scope string, size int64, budgets []pathBudget) error {
	parts := make([]string, len(budgets))
	for i, b := range budgets {
		parts[i] = b.String()
	}
	where := "node " + node
	if scope != node {
		where = "the shared file system"
	}
	return fmt.Errorf("%w on %s for a request of %s: %s", ErrNoRoom, where, bytesString(size), strings.Join(parts, "; "))
}

// settleHold keeps pvName's hold only on the root Dirs chose, or drops it
// when nothing was made (root empty).
func (p *Provisioner) settleHold(scope, pvName, root string) {
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	h, ok := p.ledger.holds[scope][pvName]
	if !ok {
		return
	}
	if root == "" || !slices.Contains(h.roots, root) {
		delete(p.ledger.holds[scope], pvName)
		return
	}
	h.roots = []string{root}
	p.ledger.holds[scope][pvName] = h
}

// releaseHold drops pvName's hold: its volume is gone.
func (p *Provisioner) releaseHold(scope, pvName string) {
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	delete(p.ledger.holds[scope], pvName)
}

func (p *Provisioner) holdLocked(scope, pvName string, h hold) {
	if p.ledger.holds == nil {
		p.ledger.holds = map[string]map[string]hold{}
	}
	if p.ledger.holds[scope] == nil {
		p.ledger.holds[scope] = map[string]hold{}
	}
	p.ledger.holds[scope][pvName] = h
}

// rootUnder is the longest of roots that path is in, or empty.
func rootUnder(roots []string, path string) string {
	var best string
	for _, r := range roots {
		rel, err := filepath.Rel(r, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || rel == "." {
			continue
		}
		if len(r) > len(best) {
			best = r
		}
	}
	return best
}

// volumeCapacity is the storage capacity a PV records, in bytes.
func volumeCapacity(pv *corev1.PersistentVolume) int64 {
	q := pv.Spec.Capacity[corev1.ResourceStorage]
	return q.Value()
}

// bytesString writes n as a claim's request would be written: 10Gi.
func bytesString(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// NodeRoom is what the paths of node left for volumes of StorageClass
// class: the most any one has (the largest volume that fits) and their
// sum. known is false when a path's budget is unknown (helper pods, no
// pathCapacity): then nothing can be promised.
func (p *Provisioner) NodeRoom(class, node string) (largest, total int64, known bool, err error) {
	paths, err := p.Paths().ForClass(class)
	if err != nil {
		return 0, 0, false, err
	}
	roots, ok := paths.PathsFor(node)
	if !ok {
		return 0, 0, true, nil
	}
	scope, _ := volumeScope(node, paths.Shared != "")
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	budgets, err := p.budgets(paths, node, scope, roots, "")
	if err != nil {
		return 0, 0, false, err
	}
	for _, b := range budgets {
		if !b.known() {
			return 0, 0, false, nil
		}
		largest = max(largest, b.left())
		total += b.left()
	}
	return largest, total, true, nil
}

// ServedNodes are the nodes this instance makes volumes of class on: its
// own, or with helper pods every node the configuration names or a PV of
// this provisioner is on.
func (p *Provisioner) ServedNodes(class string) ([]string, error) {
	paths, err := p.Paths().ForClass(class)
	if err != nil {
		return nil, err
	}
	return p.servedNodes(paths), nil
}

// holdExpansion checks that pv's volume can grow to newBytes on its path
// and holds the increase there until the PV shows it; ErrNoRoom names the
// numbers when it cannot.
func (p *Provisioner) holdExpansion(pv *corev1.PersistentVolume, newBytes int64) (root string, err error) {
	node, shared := pv.Annotations[AnnNode], pv.Annotations[AnnShared] == "true"
	paths, err := p.Paths().ForClass(pv.Spec.StorageClassName)
	if err != nil {
		return "", err
	}
	roots, _ := paths.PathsFor(node)
	root = rootUnder(roots, volumePathOf(pv))
	if root == "" {
		return "", fmt.Errorf("the volume's path %s is under no path of node %s in the configuration (%v)", quoted(volumePathOf(pv)), node, roots)
	}
	scope, _ := volumeScope(node, shared)
	p.ledger.mu.Lock()
	defer p.ledger.mu.Unlock()
	budgets, err := p.budgets(paths, node, scope, []string{root}, pv.Name)
	if err != nil {
		return "", err
	}
	if b := budgets[0]; b.known() && b.left() < newBytes {
		where := "node " + node
		if shared {
			where = "the shared file system"
		}
		return "", fmt.Errorf("%w on %s to grow %s to %s: %s, besides this volume", ErrNoRoom, where, pv.Name, bytesString(newBytes), b)
	}
	p.holdLocked(scope, pv.Name, hold{roots: []string{root}, bytes: newBytes - volumeCapacity(pv), until: newBytes})
	return root, nil
}

// SharedClass says whether the volumes of class are on the shared file
// system: reachable from every node, so their room is every node's.
func (p *Provisioner) SharedClass(class string) bool {
	paths, err := p.Paths().ForClass(class)
	return err == nil && paths.Shared != ""
}

// IsVolume says whether pv is a volume of a hostpath provisioner, and the
// node whose room it takes (empty on the shared file system).
func (p *Provisioner) IsVolume(pv *corev1.PersistentVolume) (node string, ok bool) {
	node, ok = pv.Annotations[AnnNode]
	if !ok || volumePathOf(pv) == "" {
		return "", false
	}
	if pv.Annotations[AnnShared] == "true" {
		return "", true
	}
	return node, true
}
