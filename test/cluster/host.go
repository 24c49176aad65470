// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// run runs a command and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// network is the cluster's piece of the host: one bridge, whose address is
// both where kube-apiserver listens and the ClusterIP of the kubernetes
// Service (so in-cluster clients reach it without kube-proxy), and the routes
// to each node's pod range. Deleting the bridge removes the routes and the
// nodes' veth ends with it.
type network struct {
	index  int    // X in 10.96.X.0/24, unique among the clusters on this host
	bridge string // kpbrX
}

// maxClusters bounds the search for a free index.
const maxClusters = 250

// ownerAlias marks a bridge with the pid of the process that made it.
const ownerAlias = "kubeprov-pid-"

// newNetwork creates the bridge of the first free index: creating a link is
// atomic, so clusters started at once (test packages) never share one. A
// bridge whose maker is dead (a test binary killed by go test's timeout does
// not run Stop) is removed first.
func newNetwork(ctx context.Context) (*network, error) {
	var lastErr error
	for i := 1; i <= maxClusters; i++ {
		n := &network{index: i, bridge: fmt.Sprintf("kpbr%d", i)}
		n.removeIfOrphaned(ctx)
		if err := run(ctx, "ip", "link", "add", n.bridge, "type", "bridge"); err != nil {
			lastErr = err
			continue
		}
		if err := run(ctx, "ip", "link", "set", n.bridge, "alias", ownerAlias+strconv.Itoa(os.Getpid())); err != nil {
			return nil, errors.Join(err, n.remove(ctx))
		}
		if err := n.setUp(ctx); err != nil {
			return nil, errors.Join(err, n.remove(ctx))
		}
		// A dead run's kube-apiserver (its test binary panicked, so nothing
		// stopped it) may still hold this address's port: take another index.
		l, err := net.Listen("tcp", net.JoinHostPort(n.hostIP(), strconv.Itoa(apiServerPort)))
		if err != nil {
			lastErr = errors.Join(fmt.Errorf("%s: a process of an earlier run still listens there: %w", n.bridge, err), n.remove(ctx))
			continue
		}
		_ = l.Close()
		return n, nil
	}
	return nil, fmt.Errorf("no free cluster bridge kpbr1..kpbr%d: %w", maxClusters, lastErr)
}

// removeIfOrphaned deletes the bridge if the process named in its alias is
// gone.
func (n *network) removeIfOrphaned(ctx context.Context) {
	alias, err := os.ReadFile("/sys/class/net/" + n.bridge + "/ifalias")
	if err != nil {
		return // no such bridge
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(alias)), ownerAlias))
	if err != nil || syscall.Kill(pid, 0) == nil {
		return // not ours, or its cluster still runs
	}
	// Its nodes' processes (containerd, kubelet, pods) are in cgroups named
	// after the bridge: end them, or they run on with the veths they hold.
	if mounts, err := cgroupMounts(); err == nil {
		nodes := map[string]bool{}
		for _, m := range mounts {
			found, _ := filepath.Glob(filepath.Join(m, "kubeprov-"+n.bridge+"-*"))
			for _, dir := range found {
				nodes[filepath.Base(dir)] = true
			}
		}
		for name := range nodes {
			if cg, err := newCgroups(name); err == nil {
				kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_ = cg.killAll(kctx)
				cancel()
				_ = cg.remove()
			}
		}
	}
	_ = n.remove(ctx)
}

func (n *network) setUp(ctx context.Context) error {
	if err := run(ctx, "ip", "addr", "add", n.hostIP()+"/24", "dev", n.bridge); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", n.bridge, "up")
}

// hostIP is the bridge's address: kube-apiserver, the registry.
func (n *network) hostIP() string { return fmt.Sprintf("10.96.%d.1", n.index) }

// serviceCIDR gives the kubernetes Service the bridge's address (the first
// address of the range) and leaves the node addresses out of it.
func (n *network) serviceCIDR() string { return fmt.Sprintf("10.96.%d.0/28", n.index) }

// nodeIP is node i's address on the bridge.
func (n *network) nodeIP(i int) string { return fmt.Sprintf("10.96.%d.%d", n.index, 20+i) }

// podCIDR is node i's pod range.
func (n *network) podCIDR(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 200+i, n.index) }

// attach gives the network namespace of pid an eth0 on the bridge with node
// i's address and a default route through the host, and routes the node's
// pod range to it.
func (n *network) attach(ctx context.Context, i, pid int) error {
	hostEnd := fmt.Sprintf("kp%d-n%d", n.index, i)
	p := strconv.Itoa(pid)
	in := func(args ...string) error {
		return run(ctx, "nsenter", append([]string{"-t", p, "-n", "ip"}, args...)...)
	}
	steps := []func() error{
		func() error {
			return run(ctx, "ip", "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", p)
		},
		func() error { return run(ctx, "ip", "link", "set", hostEnd, "master", n.bridge, "up") },
		func() error { return in("addr", "add", n.nodeIP(i)+"/24", "dev", "eth0") },
		func() error { return in("link", "set", "eth0", "up") },
		func() error { return in("route", "add", "default", "via", n.hostIP()) },
		func() error { return run(ctx, "ip", "route", "add", n.podCIDR(i), "via", n.nodeIP(i), "dev", n.bridge) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the bridge (and with it the routes and veth ends).
func (n *network) remove(ctx context.Context) error {
	return run(ctx, "ip", "link", "del", n.bridge)
}

// cgroups is a node's cgroup, made in every hierarchy of this cgroup-v1 host
// (and the empty cgroup2 one, where runc also creates its cgroups): the
// kubelet's cgroupRoot. Its "node" child holds the node's own processes
// (namespace holder, containerd and its shims, kubelet), so everything the
// node ran can be found and killed at teardown.
type cgroups struct {
	name  string   // /kubeprov-<cluster>-<node>
	roots []string // its directory in each hierarchy
}

// cgroupMounts lists the mounted cgroup hierarchies.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		for j, field := range fields {
			if field == "-" && j+1 < len(fields) && (fields[j+1] == "cgroup" || fields[j+1] == "cgroup2") {
				dirs = append(dirs, fields[4])
			}
		}
	}
	return dirs, sc.Err()
}

func newCgroups(name string) (*cgroups, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	cg := &cgroups{name: "/" + name}
	for _, m := range mounts {
		root := filepath.Join(m, name)
		cg.roots = append(cg.roots, root)
		for _, dir := range []string{root, filepath.Join(root, "node")} {
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return cg, err
			}
			// A new cpuset cgroup has no CPUs or memory nodes: a process
			// cannot join it until they are copied from the parent.
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), file)); err == nil {
					if err := os.WriteFile(filepath.Join(dir, file), v, 0o644); err != nil {
						return cg, err
					}
				}
			}
		}
	}
	return cg, nil
}

// adopt moves pid into the node child in every hierarchy.
func (cg *cgroups) adopt(pid int) error {
	for _, root := range cg.roots {
		if err := os.WriteFile(filepath.Join(root, "node", "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving pid %d into %s: %w", pid, root, err)
		}
	}
	return nil
}

// pids lists every process in the node's cgroups, in any hierarchy.
func (cg *cgroups) pids() map[int]bool {
	found := map[int]bool{}
	for _, root := range cg.roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					found[pid] = true
				}
			}
			return nil
		})
	}
	return found
}

// killAll SIGKILLs every process of the node until none is left.
func (cg *cgroups) killAll(ctx context.Context) error {
	for {
		pids := cg.pids()
		if len(pids) == 0 {
			return nil
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes left in %s: %v: %w", cg.name, pids, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// remove removes the (empty) cgroups, the deepest first.
func (cg *cgroups) remove() error {
	var errs []error
	for _, root := range cg.roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for j := len(dirs) - 1; j >= 0; j-- {
			if err := syscall.Rmdir(dirs[j]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[j], err))
			}
		}
	}
	return errors.Join(errs...)
}
