// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cluster runs a Kubernetes cluster with real nodes on this machine,
// as users run the provisioners: the control plane of package framework
// (with node authorization, service account tokens, every controller and
// kube-scheduler) and N nodes, each a kubelet and containerd (runc, CNI
// bridge) in mount and network namespaces of its own, pulling images from a
// registry the cluster serves. See docs/development.md, "Real nodes".
//
// The host stays as it was: each node's /var and /run are overlays and the
// sysctls kubelet sets are files bound over /proc/sys, inside the node's
// mount namespace; the only host objects are one bridge (kpbrN, with the
// routes to the pod ranges) and one cgroup per node in each hierarchy, which
// Stop removes with every process the node ran. It needs root.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/framework"
)

// apiServerPort is the port of the kubernetes Service: kube-apiserver listens
// on it at the Service's ClusterIP, so pods reach it without kube-proxy.
const apiServerPort = 443

// nodeScript builds kubelet, kube-scheduler, containerd and the CNI plugins.
const nodeScript = "hack/node.sh"

// Options for Start.
type Options struct {
	// Nodes is the number of nodes (default 1).
	Nodes int
	// Log receives progress lines.
	Log func(format string, args ...any)
	// AuditLog makes kube-apiserver write an audit log (framework
	// Options.AuditLog), for AuditEvents, Forbidden and ExpectNoForbidden.
	AuditLog bool
	// AfterTests, if set, is called by RunMain once the tests have run,
	// before the cluster stops: an error fails the package. For checks of
	// the whole suite, such as the audit log's.
	AfterTests func(ctx context.Context, c *Cluster) error
	// SharedDirs are absolute node paths that every node mounts from one
	// directory of the cluster, as nodes mount a network share: what a pod
	// writes there on one node, pods on every node see. Their top-level
	// directory (/srv for /srv/flex-volumes) must exist on this host; the
	// host's stays unchanged (see holderScript).
	SharedDirs []string
}

// Cluster is a running control plane with real nodes.
type Cluster struct {
	*framework.ControlPlane
	// Nodes are ready when Start returns.
	Nodes []*Node
	// Registry is host:port of the cluster's image registry, for image
	// references and make push REGISTRY=<Registry>/<namespace>.
	Registry string
	// HostIP is the host's address on the cluster's bridge, where pods
	// reach services of the host (kube-apiserver and the registry listen
	// there): a test backend serving pods listens on it.
	HostIP string
	// SchedulerLog is kube-scheduler's output.
	SchedulerLog string
	// NodeBinDir holds kubelet, containerd and the other node binaries.
	NodeBinDir string
	// NodesDir holds the nodes' directories and kube-scheduler's log (the
	// control plane's are in Dir).
	NodesDir string

	net       *network
	registry  *localRegistry
	scheduler *framework.Process
	dir       string
}

// Start builds what is missing (hack/controlplane.sh, hack/node.sh), starts
// the control plane, kube-scheduler and the nodes, and returns when every
// node is Ready. On error it stops what it started.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	log := opts.Log
	if log == nil {
		log = func(string, ...any) {}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("real nodes need root (namespaces, mounts, cgroups, a bridge)")
	}
	for _, tool := range []string{"runc", "unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing (hack/deps/node.sh installs it): %w", tool, err)
		}
	}
	c := &Cluster{}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, c.Stop())
		}
	}()
	var err error
	if c.dir, err = os.MkdirTemp("", "kubeprov-cluster-"); err != nil {
		return nil, err
	}
	c.NodesDir = c.dir
	if c.net, err = newNetwork(ctx); err != nil {
		return nil, err
	}
	c.HostIP = c.net.hostIP()
	kubeletClient, err := writeKubeletClientCerts(c.dir)
	if err != nil {
		return nil, err
	}
	c.ControlPlane, err = framework.Start(ctx, framework.Options{
		Log:              log,
		AuditLog:         opts.AuditLog,
		APIServerAddress: c.net.hostIP(),
		APIServerPort:    apiServerPort,
		APIServerArgs: map[string][]string{
			"authorization-mode":              {"Node,RBAC"},
			"enable-admission-plugins":        {"NodeRestriction"},
			"disable-admission-plugins":       nil, // envtest turns off ServiceAccount
			"advertise-address":               {c.net.hostIP()},
			"service-cluster-ip-range":        {c.net.serviceCIDR()},
			"allow-privileged":                {"true"},
			"kubelet-client-certificate":      {kubeletClient.CertFile},
			"kubelet-client-key":              {kubeletClient.KeyFile},
			"kubelet-preferred-address-types": {"InternalIP"},
		},
		ControllerManagerArgs: []string{"--controllers=*"},
	})
	if err != nil {
		return nil, err
	}
	// After the control plane's build (framework.Start), whose compiled
	// packages the node build reuses. Both stream their progress.
	log("building kubelet, kube-scheduler, containerd and the CNI plugins if needed (cold: about 3 min; warm: a second)...")
	if c.NodeBinDir, err = buildNode(ctx, log); err != nil {
		return nil, err
	}
	if err := c.grantKubeletAccess(ctx); err != nil {
		return nil, err
	}
	if err := c.startScheduler(ctx); err != nil {
		return nil, err
	}
	if c.registry, err = startRegistry(c.net.hostIP()); err != nil {
		return nil, err
	}
	c.Registry = c.registry.Host
	if err := c.registry.pushBaseImages(ctx); err != nil {
		return nil, err
	}
	shared, err := c.makeSharedDirs(opts.SharedDirs)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	for i := range max(opts.Nodes, 1) {
		name := nodeName(i)
		_, kubeconfig, err := c.AddUser("system:node:"+name, []string{"system:nodes"})
		if err != nil {
			return nil, err
		}
		node, err := startNode(ctx, nodeConfig{
			index: i, binDir: c.NodeBinDir, net: c.net, registry: c.registry,
			kubeconfig: kubeconfig, clientCA: kubeletClient.CAFile,
			clusterName: c.net.bridge, shared: shared,
		}, filepath.Join(c.dir, name))
		if node != nil && node.cg != nil {
			c.Nodes = append(c.Nodes, node) // so that Stop cleans up after a failed start
		}
		if err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(ctx, n); err != nil {
			return nil, err
		}
	}
	log("%d node(s) Ready in %s (logs in %s)", len(c.Nodes), time.Since(started).Round(time.Millisecond), c.dir)
	return c, nil
}

// makeSharedDirs makes a directory in the cluster's for each of the node
// paths and returns them by node path.
func (c *Cluster) makeSharedDirs(nodePaths []string) (map[string]string, error) {
	shared := map[string]string{}
	for i, p := range nodePaths {
		top, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || top == "" || top == p[1:] {
			return nil, fmt.Errorf("shared directory %q: want a clean absolute path below a top-level directory", p)
		}
		if fi, err := os.Stat("/" + top); err != nil {
			return nil, fmt.Errorf("shared directory %q: its top-level directory must exist on this host (nodes overlay it): %w", p, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("shared directory %q: /%s is not a directory", p, top)
		}
		dir := filepath.Join(c.dir, "shared", strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		shared[p] = dir
	}
	return shared, nil
}

// buildNode runs hack/node.sh, streaming its progress to log, and returns
// its binary directory.
func buildNode(ctx context.Context, log func(string, ...any)) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, nodeScript)
	out, err := exec.CommandContext(ctx, "bash", script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s --print-dir: %w", script, err)
	}
	if err := framework.RunStreaming(ctx, root, log, "bash", script); err != nil {
		return "", fmt.Errorf("building the node components with %s: %w", script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// grantKubeletAccess lets kube-apiserver use the kubelets' API (logs, exec),
// which kubelets authorize by asking the apiserver (webhook).
func (c *Cluster) grantKubeletAccess(ctx context.Context) error {
	_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeprov:kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}, metav1.CreateOptions{})
	return err
}

// startScheduler runs kube-scheduler as the user its bootstrap RBAC names.
func (c *Cluster) startScheduler(ctx context.Context) error {
	_, kubeconfig, err := c.AddUser("system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	c.SchedulerLog = filepath.Join(c.dir, "kube-scheduler.log")
	c.scheduler, err = framework.StartProcess(ctx, framework.ProcessOptions{
		Binary:       filepath.Join(c.NodeBinDir, "kube-scheduler"),
		Args:         []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"},
		LogPath:      c.SchedulerLog,
		NoEndpoint:   true,
		ProcessGroup: true,
	})
	return err
}

// waitNodeReady waits until the node reports Ready.
func (c *Cluster) waitNodeReady(ctx context.Context, n *Node) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		// The kubelet of the version the suite asked for, not the default one.
		if want, got := framework.WantedKubeVersion(), node.Status.NodeInfo.KubeletVersion; want != "" && got != "" && got != want {
			return false, fmt.Errorf("%s=%s but node %s runs kubelet %s", framework.KubeVersionEnv, want, n.Name, got)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s is not Ready: %w\nkubelet log tail (%s):\n%s", n.Name, err, n.KubeletLog, framework.LogTail(n.KubeletLog, 20))
	}
	return nil
}

// Node is the node of that name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Image is the reference of repoTag (such as BusyboxImage) in the cluster's
// registry.
func (c *Cluster) Image(repoTag string) string { return c.Registry + "/" + repoTag }

// Stop kills every process of every node and removes their cgroups, stops
// kube-scheduler, the registry and the control plane, removes the bridge and
// the cluster's directory. It is safe after a failed Start and more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.stop())
	}
	c.Nodes = nil
	if c.scheduler != nil {
		// Without leader election kube-scheduler exits 1 on SIGTERM ("finished
		// without leader elect"): there is nothing to wait for.
		errs = append(errs, c.scheduler.Kill())
		c.scheduler = nil
	}
	if c.registry != nil {
		errs = append(errs, c.registry.stop())
		c.registry = nil
	}
	if c.ControlPlane != nil {
		errs = append(errs, c.ControlPlane.Stop())
	}
	if c.net != nil {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultProcessTimeout)
		defer cancel()
		errs = append(errs, c.net.remove(ctx))
		c.net = nil
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
		c.dir = ""
	}
	return errors.Join(errs...)
}
