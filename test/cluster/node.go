// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/kubeprov/external-storage/test/framework"
)

// holderScript runs in the node's new mount and network namespaces (unshare
// made the mounts private, so nothing below reaches the host) and keeps them
// alive. Kubelet and containerd write fixed paths under /var and /run: an
// overlay over each keeps their writes in the node's directory. Kubelet sets
// sysctls it wants: files with those values, bound over the /proc/sys
// entries, take its writes instead of the host. Each shared directory (the
// arguments after dir, pairs of a host directory and a node path) is bound
// at its node path, whose top-level directory is an overlay too, so that
// making the mount point leaves the host unchanged.
const holderScript = `set -eu
dir=$1
shift
mount --make-rshared /
tops="var run"
i=2
while [ $i -le $# ]; do
	top=$(echo "${!i}" | cut -d/ -f2)
	case " $tops " in *" $top "*) ;; *) tops="$tops $top" ;; esac
	i=$((i + 2))
done
for d in $tops; do
	mkdir -p "$dir/overlay/$d/upper" "$dir/overlay/$d/work"
	mount -t overlay overlay -o "lowerdir=/$d,upperdir=$dir/overlay/$d/upper,workdir=$dir/overlay/$d/work" "/$d"
done
while [ $# -ge 2 ]; do
	mkdir -p "$2"
	mount --bind "$1" "$2"
	shift 2
done
mkdir -p "$dir/sysctl"
while read -r key value; do
	echo "$value" >"$dir/sysctl/$key"
	mount --bind "$dir/sysctl/$key" "/proc/sys/$(echo "$key" | tr . /)"
done <<SYSCTLS
vm.overcommit_memory 1
vm.panic_on_oom 0
kernel.panic 10
kernel.panic_on_oops 1
kernel.keys.root_maxkeys 1000000
kernel.keys.root_maxbytes 25000000
SYSCTLS
ip link set lo up
touch "$dir/ready"
exec sleep infinity
`

// Node is a real Kubernetes node: kubelet and containerd (with runc and the
// CNI bridge) in mount and network namespaces of their own.
type Node struct {
	// Name is the node's name in the API.
	Name string
	// IP is its address on the cluster bridge.
	IP string
	// Dir holds its configuration, logs and state (containerd's root, the
	// upper layers of its /var and /run overlays).
	Dir string
	// KubeletLog and ContainerdLog are the processes' output.
	KubeletLog, ContainerdLog string
	// ContainerdSocket is containerd's socket, usable from the host:
	// ctr --address <socket> -n k8s.io containers ls.
	ContainerdSocket string

	holder     *exec.Cmd
	holderDone chan struct{}
	cg         *cgroups
}

// nodeConfig is what a node needs to know of its cluster.
type nodeConfig struct {
	index       int
	binDir      string
	net         *network
	registry    *localRegistry
	kubeconfig  string // the node's own (system:node:<name>)
	clientCA    string // kubelet's x509 client CA (kube-apiserver's certificate)
	clusterName string // for unique cgroup names
	// shared maps node paths to the host directories bound there.
	shared map[string]string
}

func nodeName(index int) string { return fmt.Sprintf("node-%d", index+1) }

func startNode(ctx context.Context, cfg nodeConfig, dir string) (_ *Node, retErr error) {
	n := &Node{
		Name:             nodeName(cfg.index),
		IP:               cfg.net.nodeIP(cfg.index),
		Dir:              dir,
		ContainerdSocket: filepath.Join(dir, "containerd.sock"),
		KubeletLog:       filepath.Join(dir, "kubelet.log"),
		ContainerdLog:    filepath.Join(dir, "containerd.log"),
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(fmt.Errorf("starting %s: %w", n.Name, retErr), n.stop())
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var err error
	if n.cg, err = newCgroups(cfg.clusterName + "-" + n.Name); err != nil {
		return n, err
	}
	if err := n.startHolder(ctx, cfg.shared); err != nil {
		return n, err
	}
	if err := cfg.net.attach(ctx, cfg.index, n.holder.Process.Pid); err != nil {
		return n, err
	}
	if err := n.writeConfig(cfg); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx, cfg.binDir); err != nil {
		return n, err
	}
	return n, n.startKubelet(ctx, cfg)
}

// startHolder starts the process that owns the node's namespaces and waits
// for its mounts (shared: node path -> host directory).
func (n *Node) startHolder(ctx context.Context, shared map[string]string) error {
	args := []string{"--mount", "--net", "--propagation", "private", "--", "bash", "-c", holderScript, "holder", n.Dir}
	for _, nodePath := range slices.Sorted(maps.Keys(shared)) {
		args = append(args, shared[nodePath], nodePath)
	}
	n.holder = exec.Command("unshare", args...)
	out, err := os.Create(filepath.Join(n.Dir, "holder.log"))
	if err != nil {
		return err
	}
	defer out.Close()
	n.holder.Stdout, n.holder.Stderr = out, out
	// If the test binary dies without Stop, the namespaces go with it.
	n.holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.holder.Start(); err != nil {
		return err
	}
	n.holderDone = make(chan struct{})
	go func() { _ = n.holder.Wait(); close(n.holderDone) }()
	if err := n.cg.adopt(n.holder.Process.Pid); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(n.Dir, "ready")); err == nil {
			return nil
		}
		select {
		case <-n.holderDone:
			return fmt.Errorf("setting up the node's namespaces failed: %s", readFile(filepath.Join(n.Dir, "holder.log")))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// inNode returns nsenter's arguments that run argv inside the node's
// namespaces (nsenter, not ip netns exec, which remounts /sys and loses the
// cgroup mounts).
func (n *Node) inNode(argv ...string) []string {
	return append([]string{"-t", strconv.Itoa(n.holder.Process.Pid), "-m", "-n", "--"}, argv...)
}

// Exec runs a command inside the node's mount and network namespaces (as a
// debugging shell would: nsenter -t <HolderPid> -m -n) and returns its output.
func (n *Node) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, "nsenter", n.inNode(argv...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("on %s: %v: %w: %s", n.Name, argv, err, out)
	}
	return out, nil
}

// HolderPid is the pid whose namespaces are the node's, for nsenter -t.
func (n *Node) HolderPid() int { return n.holder.Process.Pid }

func (n *Node) writeConfig(cfg nodeConfig) error {
	containerd := fmt.Sprintf(`version = 3
root = %[1]q
state = "/run/containerd"

[grpc]
  address = %[2]q

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # No AppArmor here, and root lacks CAP_SYS_RESOURCE in this VM: without
  # restrict_oom_score_adj runc fails setting the container's oom_score_adj.
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[3]q]
    conf_dir = %[4]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[5]q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[6]q

[plugins.'io.containerd.nri.v1.nri']
  disable = true
`, filepath.Join(n.Dir, "containerd"), n.ContainerdSocket, filepath.Join(cfg.binDir, "cni"),
		filepath.Join(n.Dir, "cni"), cfg.registry.Host+"/"+PauseImage, filepath.Join(n.Dir, "certs.d"))

	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubeprov",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, cfg.net.podCIDR(cfg.index))

	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host has cgroup v1 only, and no systemd managing cgroups.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
failSwapOn: false
containerRuntimeEndpoint: unix://%[2]s
address: %[3]q
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[4]q
authorization:
  mode: Webhook
serializeImagePulls: false
# The nodes share the host's disk, whose free share this suite does not
# control (15%% of 252 GB free is common here): kubelet's default thresholds
# (10%% nodefs, 15%% imagefs) would taint the nodes with disk-pressure and
# evict the pods under test. Only a nearly full disk counts as pressure.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1Gi
  nodefs.inodesFree: 1%%
  imagefs.available: 1Gi
  imagefs.inodesFree: 1%%
# Nor is a test's image garbage-collected because the host disk is full of
# other things: the images were pushed once per run.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.cg.name, n.ContainerdSocket, n.IP, cfg.clientCA)

	files := map[string]string{
		"containerd.toml":          containerd,
		"cni/10-kubeprov.conflist": cni,
		"kubelet.yaml":             kubelet,
		filepath.Join("certs.d", cfg.registry.Host, "hosts.toml"): cfg.registry.hostsTOML(),
	}
	for name, content := range files {
		p := filepath.Join(n.Dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) startContainerd(ctx context.Context, binDir string) error {
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{
		Binary:     "nsenter",
		Args:       n.inNode(filepath.Join(binDir, "containerd"), "--config", filepath.Join(n.Dir, "containerd.toml")),
		Env:        []string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, // its shim
		LogPath:    n.ContainerdLog,
		NoEndpoint: true,
		Ready: func(ctx context.Context) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", n.ContainerdSocket)
			if err == nil {
				_ = c.Close()
			}
			return err
		},
	})
	if err != nil {
		return fmt.Errorf("containerd: %w\n%s", err, readFile(n.ContainerdLog))
	}
	// Its shims, forked later, stay in its cgroup: stop finds them there.
	return n.cg.adopt(p.Pid())
}

func (n *Node) startKubelet(ctx context.Context, cfg nodeConfig) error {
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{
		Binary: "nsenter",
		Args: n.inNode(filepath.Join(cfg.binDir, "kubelet"),
			"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
			"--kubeconfig="+cfg.kubeconfig,
			"--hostname-override="+n.Name,
			"--node-ip="+n.IP,
		),
		LogPath:    n.KubeletLog,
		NoEndpoint: true,
	})
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	return n.cg.adopt(p.Pid())
}

// stop kills every process of the node (kubelet, containerd, shims,
// containers, the namespace holder: all are in its cgroups), which ends its
// namespaces and with them its mounts and interfaces, then removes the
// cgroups.
func (n *Node) stop() error {
	if n.cg == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultProcessTimeout)
	defer cancel()
	errs := []error{n.cg.killAll(ctx)}
	if n.holderDone != nil {
		<-n.holderDone
	}
	return errors.Join(append(errs, n.cg.remove())...)
}

func readFile(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data)
}
