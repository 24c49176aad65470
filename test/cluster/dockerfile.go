// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// PushDockerfileImage builds the image a Dockerfile of the repository
// describes, without a container engine, and pushes it as repoTag; it
// returns the reference. FROM and RUN cannot run here: a Debian base with
// the packages its RUN lines install is stood in for by this (Debian) host's
// files: busybox (BusyboxImage) for the base's shell and core utilities,
// and each of hostTools (such as "jq") with the shared libraries it loads.
// COPY (sources relative to contextDir), ENV, USER, WORKDIR, ENTRYPOINT and
// CMD are applied as written. Any other instruction is an error, so that a
// change to the Dockerfile this builder cannot follow fails the test rather
// than going unnoticed.
func (c *Cluster) PushDockerfileImage(ctx context.Context, dockerfile, contextDir, repoTag string, hostTools ...string) (string, error) {
	img, err := dockerfileImage(dockerfile, contextDir, hostTools)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", dockerfile, err)
	}
	if err := c.registry.push(ctx, repoTag, img); err != nil {
		return "", err
	}
	return c.Image(repoTag), nil
}

func dockerfileImage(dockerfile, contextDir string, hostTools []string) (v1.Image, error) {
	instructions, err := readDockerfile(dockerfile)
	if err != nil {
		return nil, err
	}
	base, err := busyboxImage()
	if err != nil {
		return nil, err
	}
	var tools []imageFile
	for _, tool := range hostTools {
		files, err := hostExecutable(tool)
		if err != nil {
			return nil, err
		}
		tools = append(tools, files...)
	}
	img, err := appendFiles(base, tools)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	var copied []imageFile
	for _, in := range instructions {
		switch in.cmd {
		case "FROM", "RUN":
			// The base and its packages: busybox and hostTools.
		case "COPY":
			files, err := dockerCopy(contextDir, cfg.Config.WorkingDir, in.args)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", in.line, err)
			}
			copied = append(copied, files...)
		case "ENV":
			k, v, ok := strings.Cut(in.args, "=")
			if !ok {
				k, v, _ = strings.Cut(in.args, " ")
			}
			cfg.Config.Env = append(slices.DeleteFunc(cfg.Config.Env, func(e string) bool { return strings.HasPrefix(e, k+"=") }),
				k+"="+strings.Trim(strings.TrimSpace(v), `"`))
		case "USER":
			cfg.Config.User = in.args
		case "WORKDIR":
			cfg.Config.WorkingDir = in.args
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
				return nil, fmt.Errorf("line %d: %s: only the exec form [\"...\"] is supported: %w", in.line, in.cmd, err)
			}
			if in.cmd == "ENTRYPOINT" {
				cfg.Config.Entrypoint = argv
			} else {
				cfg.Config.Cmd = argv
			}
		default:
			return nil, fmt.Errorf("line %d: %s is not supported by this builder", in.line, in.cmd)
		}
	}
	if img, err = appendFiles(img, copied); err != nil {
		return nil, err
	}
	// The configuration of the image with every layer (their diffIDs), and
	// what the instructions set.
	final, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	final = final.DeepCopy()
	final.Config = cfg.Config
	return mutate.ConfigFile(img, final)
}

// appendFiles adds a layer of files to img.
func appendFiles(img v1.Image, files []imageFile) (v1.Image, error) {
	if len(files) == 0 {
		return img, nil
	}
	layer, err := fileLayer(files)
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, layer)
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string
	args string
}

func readDockerfile(name string) ([]instruction, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []instruction
	var cur string
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur == "" {
			continue
		}
		if cur == "" {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		cur += line
		cmd, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur = ""
	}
	return out, sc.Err()
}

// dockerCopy reads the files of COPY <src>... <dest>: files only, as the
// example Dockerfiles copy them.
func dockerCopy(contextDir, workDir, args string) ([]imageFile, error) {
	fields := strings.Fields(args)
	if len(fields) < 2 || strings.HasPrefix(fields[0], "--") {
		return nil, fmt.Errorf("COPY %s: want COPY <src>... <dest> without flags", args)
	}
	srcs, dest := fields[:len(fields)-1], fields[len(fields)-1]
	if !path.IsAbs(dest) {
		dest = path.Join("/", workDir, dest)
	}
	var files []imageFile
	for _, src := range srcs {
		p := filepath.Join(contextDir, filepath.FromSlash(src))
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("COPY %s: %w", src, err)
		}
		target := dest
		if strings.HasSuffix(dest, "/") || len(srcs) > 1 {
			target = path.Join(dest, path.Base(src))
		}
		files = append(files, imageFile{path: target, data: data})
	}
	return files, nil
}

// lddLibrary matches the libraries ldd lists: "libc.so.6 => /lib/.../libc.so.6 (0x...)"
// and the loader "/lib64/ld-linux-x86-64.so.2 (0x...)".
var lddLibrary = regexp.MustCompile(`(?m)^\s*(?:\S+ => )?(/\S+) \(0x`)

// hostExecutable is a program of this host (looked up in PATH) with the
// shared libraries it loads, each at its path on the host.
func hostExecutable(name string) ([]imageFile, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed here: %w", name, err)
	}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	paths := []string{bin}
	switch {
	case err == nil:
		for _, m := range lddLibrary.FindAllStringSubmatch(string(out), -1) {
			paths = append(paths, m[1])
		}
	case !strings.Contains(string(out), "not a dynamic executable"):
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	var files []imageFile
	for _, p := range paths {
		data, err := os.ReadFile(p) // follows symbolic links: the library itself
		if err != nil {
			return nil, err
		}
		files = append(files, imageFile{path: p, data: data})
	}
	return files, nil
}
