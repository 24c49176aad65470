// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command imagebuild assembles and pushes the provisioners' OCI images without
// a container engine. hack/build.make runs it; see docs/releasing.md.
//
//	imagebuild build -name NAME -binary linux/amd64=PATH -binary linux/arm64=PATH \
//	    -version V -revision R -source URL -tag TAG -o DIR
//	imagebuild push -layout DIR -ref REGISTRY/NAME:TAG
//	imagebuild rootfs -o FILE.tar.gz [-user NAME:UID:GID[:HOME]]... PKG.deb...
//	imagebuild attestations -ref REGISTRY/NAME:TAG -o DIR
//
// build writes an OCI layout whose index.json names one image index (one
// image per platform). Every image has the same two layers below the binary's
// own: a base layer made here (CA certificates from this machine, a nonroot
// user 65532, /tmp) because no base image can be pulled, and the static
// binary at /usr/local/bin/NAME as the entrypoint. Timestamps come from
// -created (the commit time), so the same inputs give the same digests.
// With -rootfs (images that need OS tools: the nfs server mode's
// NFS-Ganesha) a root filesystem lies below the base layer, whose passwd,
// group and nsswitch.conf then extend the root filesystem's own.
//
// rootfs unpacks Debian packages (hack/debian-rootfs.sh resolves and
// downloads them) into one gzip-compressed tar, as dpkg would but without
// running maintainer scripts: it writes the system users they would have
// made, dpkg's status, /run, /tmp and /var/run. The packages' own owners,
// modes and times are kept, so the same packages give the same bytes.
//
// build also gives each platform's image an SPDX SBOM (the binary's Go
// modules, the root filesystem's Debian packages) and a SLSA provenance
// statement, as OCI artifacts whose subject is that image's manifest,
// listed in the layout beside the index (attest.go).
//
// push copies what a layout holds (an index built here or by docker buildx,
// and the artifacts referring to it) to a registry, with credentials from
// the Docker config (docker login or crane auth login).
//
// attestations fetches the SBOM and provenance of each platform of a pushed
// image into DIR/OS_ARCH/, through the registry's referrers API or the
// referrers tag schema (sha256-<digest>) of registries without it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: imagebuild build|push|rootfs|attestations [flags] (-h for the flags of each)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "build":
		return runBuild(args[1:])
	case "push":
		return runPush(ctx, args[1:])
	case "rootfs":
		return runRootfs(args[1:])
	case "attestations":
		return runAttestations(ctx, args[1:])
	default:
		return fmt.Errorf("unknown command %q: want build, push, rootfs or attestations", args[0])
	}
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var o buildOptions
	var f buildFlags
	f.register(fs, &o)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.apply(&o, fs.Args()); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	digest, err := build(o)
	if err != nil {
		return err
	}
	fmt.Printf("%s: image index %s for %s in %s\n", o.Name, digest, f.binaries.platforms(), o.Out)
	return nil
}

// buildFlags holds build's flags that buildOptions does not take as given.
type buildFlags struct {
	binaries, rootfs                       platformFlag
	created, goals                         string
	ports, volumes, params, platformLabels listFlag
}

// register defines build's flags on fs, into o or f.
func (f *buildFlags) register(fs *flag.FlagSet, o *buildOptions) {
	fs.StringVar(&o.Name, "name", "", "binary name; the entrypoint is /usr/local/bin/NAME")
	fs.Var(&f.binaries, "binary", "OS/ARCH[/VARIANT]=PATH of a static binary, once per platform")
	fs.StringVar(&o.Version, "version", "", "version label (org.opencontainers.image.version)")
	fs.StringVar(&o.Revision, "revision", "", "git commit (org.opencontainers.image.revision)")
	fs.StringVar(&o.Source, "source", "", "source repository URL (org.opencontainers.image.source)")
	fs.StringVar(&o.Tag, "tag", "", "tag recorded as the layout's org.opencontainers.image.ref.name")
	fs.StringVar(&f.created, "created", "0", "creation time: Unix seconds (the commit time) or RFC 3339")
	fs.StringVar(&o.CACertificates, "ca-certificates", defaultCACertificates, "CA bundle copied to "+caBundlePath)
	fs.StringVar(&o.Out, "o", "", "output directory (replaced) for the OCI layout")
	fs.Var(&f.rootfs, "rootfs", "OS/ARCH[/VARIANT]=PATH of a root filesystem (imagebuild rootfs) below the base layer, once per platform")
	fs.StringVar(&o.User, "user", "", "UID:GID the image runs as (default the nonroot user)")
	fs.Var(&f.ports, "expose", "PORT/PROTOCOL recorded as exposed (repeatable)")
	fs.Var(&f.volumes, "volume", "directory recorded as a volume (repeatable)")
	fs.StringVar(&o.Provenance.BuilderID, "builder-id", "", "URI of who built, recorded as the provenance's builder.id (default SOURCE/hack/build.make)")
	fs.StringVar(&f.goals, "goals", "", "make goals of this build, space-separated, recorded in the provenance")
	fs.Var(&f.params, "param", "NAME=VALUE of a make variable recorded in the provenance (repeatable)")
	fs.Var(&f.platformLabels, "platform-label", "OS/ARCH[/VARIANT]=KEY=VALUE: a label (and manifest annotation) of that platform's image only (repeatable)")
}

// apply parses the parsed flags' values into o; args are the arguments
// left after the flags, which build takes none of.
func (f *buildFlags) apply(o *buildOptions, args []string) error {
	o.ExposedPorts, o.Volumes = f.ports, f.volumes
	o.Provenance.Goals = strings.Fields(f.goals)
	o.Provenance.Params = map[string]string{}
	for _, p := range f.params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return fmt.Errorf("-param %q: want NAME=VALUE", p)
		}
		o.Provenance.Params[k] = v
	}
	if o.Provenance.BuilderID == "" {
		o.Provenance.BuilderID = strings.TrimSuffix(o.Source, "/") + "/hack/build.make"
	}
	if len(f.rootfs) > 0 {
		o.RootFS = map[string]string{}
		for _, r := range f.rootfs {
			o.RootFS[r.Platform.String()] = r.Path
		}
	}
	var err error
	if o.PlatformLabels, err = parsePlatformLabels(f.platformLabels); err != nil {
		return err
	}
	if len(args) != 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	t, err := parseTime(f.created)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	o.Created = t
	o.Binaries = f.binaries
	return nil
}

func runRootfs(args []string) error {
	fs := flag.NewFlagSet("rootfs", flag.ContinueOnError)
	var o rootfsOptions
	fs.Var(&o.Users, "user", "NAME:UID:GID[:HOME] of a system user a package's maintainer script would create (repeatable)")
	fs.StringVar(&o.Out, "o", "", "output file: the root filesystem as a gzip-compressed tar")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Debs = fs.Args()
	if o.Out == "" || len(o.Debs) == 0 {
		return errors.New("rootfs needs -o FILE and the .deb files to unpack, in order")
	}
	return buildRootfs(o)
}

// listFlag collects a repeated flag's values.
type listFlag []string

func (f *listFlag) String() string { return strings.Join(*f, ",") }

func (f *listFlag) Set(s string) error {
	*f = append(*f, s)
	return nil
}

func runPush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	layoutDir := fs.String("layout", "", "OCI layout written by build (or docker buildx --output type=oci,tar=false)")
	ref := fs.String("ref", "", "destination, REGISTRY/REPOSITORY:TAG")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *layoutDir == "" || *ref == "" || fs.NArg() != 0 {
		return errors.New("push needs -layout DIR and -ref REGISTRY/REPOSITORY:TAG")
	}
	pushed, err := push(ctx, *layoutDir, *ref)
	if err != nil {
		return err
	}
	fmt.Println("pushed", pushed)
	return nil
}

func runAttestations(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("attestations", flag.ContinueOnError)
	ref := fs.String("ref", "", "image or image index, REGISTRY/REPOSITORY:TAG or @DIGEST")
	out := fs.String("o", "", "directory to write each platform's files into (DIR/OS_ARCH/)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ref == "" || *out == "" || fs.NArg() != 0 {
		return errors.New("attestations needs -ref REGISTRY/REPOSITORY:TAG and -o DIR")
	}
	files, err := fetchAttestations(ctx, *ref, *out)
	for _, f := range files {
		fmt.Println(f)
	}
	return err
}

// parsePlatformLabels reads OS/ARCH[/VARIANT]=KEY=VALUE into labels by
// platform.
func parsePlatformLabels(flags []string) (map[string]map[string]string, error) {
	var labels map[string]map[string]string
	for _, f := range flags {
		spec, label, _ := strings.Cut(f, "=")
		key, value, _ := strings.Cut(label, "=")
		p, err := v1.ParsePlatform(spec)
		if err != nil || p.OS == "" || p.Architecture == "" || key == "" || value == "" {
			return nil, fmt.Errorf("-platform-label %q: want OS/ARCH[/VARIANT]=KEY=VALUE with a value", f)
		}
		if labels == nil {
			labels = map[string]map[string]string{}
		}
		if labels[p.String()] == nil {
			labels[p.String()] = map[string]string{}
		}
		labels[p.String()][key] = value
	}
	return labels, nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	var sec int64
	if _, err := fmt.Sscanf(s, "%d", &sec); err != nil || fmt.Sprint(sec) != strings.TrimSpace(s) {
		return time.Time{}, fmt.Errorf("%q is neither Unix seconds nor RFC 3339", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}
