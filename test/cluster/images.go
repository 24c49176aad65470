// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeprov/external-storage/test/framework"
)

// The images every cluster has in its registry (Cluster.Image gives their
// references). No registry outside this machine is reachable: they are
// built here from static binaries.
const (
	// PauseImage is the pod sandbox image containerd is pinned to.
	PauseImage = "pause:3.10"
	// BusyboxImage is Debian's busybox-static, for the pods of the docs'
	// examples (busybox:1.37 there).
	BusyboxImage = "busybox:1.37"
	// InclusterImage runs test/cmd/incluster: it prints the apiserver
	// version it reads with its pod's service account.
	InclusterImage = "kubeprov-incluster:test"
)

// busyboxApplets are the commands the busybox image links to /bin/busybox.
var busyboxApplets = []string{"sh", "cat", "date", "echo", "ls", "sleep", "touch", "id", "test", "mkdir", "rm", "chmod"}

// localRegistry is an OCI registry in memory. It listens on 127.0.0.1 (for
// pushes from this machine, which go-containerregistry and make push do over
// plain HTTP to loopback addresses) and on the bridge address with the same
// port (for the nodes' containerd, which a hosts.toml points there).
type localRegistry struct {
	Host   string // 127.0.0.1:port, the host part of image references
	Bridge string // bridge address:port
	srv    *http.Server
}

func startRegistry(bridgeIP string) (*localRegistry, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	r := &localRegistry{
		Host:   fmt.Sprintf("127.0.0.1:%d", port),
		Bridge: fmt.Sprintf("%s:%d", bridgeIP, port),
		srv: &http.Server{
			Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
			ReadHeaderTimeout: 10 * time.Second,
		},
	}
	for _, addr := range []string{r.Host, r.Bridge} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			_ = r.srv.Close()
			return nil, fmt.Errorf("registry: %w", err)
		}
		go func() { _ = r.srv.Serve(l) }()
	}
	return r, nil
}

func (r *localRegistry) stop() error {
	if err := r.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// hostsTOML is containerd's registry configuration for the registry: pull
// over plain HTTP from its bridge address.
func (r *localRegistry) hostsTOML() string {
	return fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", r.Bridge)
}

// push writes img to the registry as repoTag (such as "pause:3.10").
func (r *localRegistry) push(ctx context.Context, repoTag string, img v1.Image) error {
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		return err
	}
	return remote.Write(ref, img, remote.WithContext(ctx))
}

// imageFile is a file of a one-layer image.
type imageFile struct {
	path     string // absolute, inside the image
	data     []byte
	linkname string // for a symbolic link instead of data
}

// fileImage is a linux/amd64 image of one layer holding files, with an
// entrypoint and user, like an image built FROM scratch.
func fileImage(files []imageFile, entrypoint []string, user string) (v1.Image, error) {
	layer, err := fileLayer(files)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.User = user
	cfg.Config.Env = []string{"PATH=/bin:/usr/bin"}
	return mutate.ConfigFile(img, cfg)
}

// fileLayer is a layer holding files, with their parent directories.
func fileLayer(files []imageFile) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		// Parent directories first: some runtimes need them in the layer.
		var parents []string
		for d := path.Dir(f.path); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		for _, d := range slices.Backward(parents) {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		hdr := &tar.Header{Name: f.path[1:], Mode: 0o755, Size: int64(len(f.data)), Typeflag: tar.TypeReg}
		if f.linkname != "" {
			hdr = &tar.Header{Name: f.path[1:], Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: f.linkname}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
}

// binaryImage is an image of one static binary of test/cmd, run as user.
func binaryImage(ctx context.Context, binary, user string) (v1.Image, error) {
	// Static (no cgo): the image has no C library.
	bin, err := framework.BuildBinary(ctx, "test", binary, "-tags=netgo,osusergo")
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return fileImage([]imageFile{{path: "/" + binary, data: data}}, []string{"/" + binary}, user)
}

// busyboxImage is Debian's busybox-static with the applets the examples use.
func busyboxImage() (v1.Image, error) {
	data, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("%w (apt-get install busybox-static, or hack/deps/node.sh)", err)
	}
	files := []imageFile{{path: "/bin/busybox", data: data}}
	for _, applet := range busyboxApplets {
		files = append(files, imageFile{path: "/bin/" + applet, linkname: "busybox"})
	}
	return fileImage(files, nil, "")
}

// pushBaseImages builds and pushes the images every cluster has.
func (r *localRegistry) pushBaseImages(ctx context.Context) error {
	pause, err := binaryImage(ctx, "pause", "65535:65535")
	if err != nil {
		return err
	}
	incluster, err := binaryImage(ctx, "incluster", "65532:65532")
	if err != nil {
		return err
	}
	busybox, err := busyboxImage()
	if err != nil {
		return err
	}
	for repoTag, img := range map[string]v1.Image{PauseImage: pause, InclusterImage: incluster, BusyboxImage: busybox} {
		if err := r.push(ctx, repoTag, img); err != nil {
			return fmt.Errorf("pushing %s: %w", repoTag, err)
		}
	}
	return nil
}

// PushTestImage builds test/cmd/<binary> into an image run as 65532 and
// pushes it as <binary>:test; it returns the reference.
func (c *Cluster) PushTestImage(ctx context.Context, binary string) (string, error) {
	img, err := binaryImage(ctx, binary, "65532:65532")
	if err != nil {
		return "", err
	}
	repoTag := binary + ":test"
	if err := c.registry.push(ctx, repoTag, img); err != nil {
		return "", err
	}
	return c.Image(repoTag), nil
}
