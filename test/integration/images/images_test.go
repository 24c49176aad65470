// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package images builds and pushes every provisioner image as a release
// does (make push in the provisioner's directory, no container engine) to a
// real OCI registry served on 127.0.0.1, and reads each back as a user's
// runtime would: the index, each platform's configuration, the files of the
// layers, and the binary itself.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeprov/external-storage/test/integration/release"
)

const (
	nonRoot    = "65532:65532"
	sourceURL  = "https://github.com/kubeprov/external-storage"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	namespace  = "kubeprov"
	entrypoint = "/usr/local/bin/"
)

// allPlatforms is what make image builds by default (hack/build.make's
// PLATFORMS): the platforms upstream's images cover.
var allPlatforms = []string{"linux/amd64", "linux/arm/v7", "linux/arm64", "linux/ppc64le", "linux/riscv64", "linux/s390x"}

// allPlatformDirs build every platform (make's default): nfs's image proves
// both rules, the Go binary's cross-compiling and the Debian root filesystem
// per architecture; the others build two platforms, each further one
// costing minutes of cold cross-compiling per image.
var (
	allPlatformDirs = []string{"nfs"}
	fewPlatforms    = []string{"linux/amd64", "linux/arm64"}
)

// elfTarget is what an ELF file built for a platform says it runs on.
type elfTarget struct {
	machine elf.Machine
	class   elf.Class
	order   binary.ByteOrder
	goarch  string // and GOARM, for the Go binaries' build settings
	goarm   string
}

var elfTargets = map[string]elfTarget{
	"linux/amd64":   {elf.EM_X86_64, elf.ELFCLASS64, binary.LittleEndian, "amd64", ""},
	"linux/arm64":   {elf.EM_AARCH64, elf.ELFCLASS64, binary.LittleEndian, "arm64", ""},
	"linux/arm/v7":  {elf.EM_ARM, elf.ELFCLASS32, binary.LittleEndian, "arm", "7"},
	"linux/ppc64le": {elf.EM_PPC64, elf.ELFCLASS64, binary.LittleEndian, "ppc64le", ""},
	"linux/s390x":   {elf.EM_S390, elf.ELFCLASS64, binary.BigEndian, "s390x", ""},
	"linux/riscv64": {elf.EM_RISCV, elf.ELFCLASS64, binary.LittleEndian, "riscv64", ""},
}

// debianSuite is the Debian release an OS image's packages come from, by
// platform (hack/build.make's DEBIAN_SUITE_<arch>).
func debianSuite(platform string) string {
	if platform == "linux/riscv64" {
		return "trixie" // Debian 12 has no riscv64 port
	}
	return "bookworm"
}

// osImages are the images with a Debian root filesystem under the binary
// (DEBIAN_PACKAGES in their Makefile): the user they run as, files of
// their packages that must be there ("a|b": either), and those that must
// be ELF programs for the image's platform.
var osImages = map[string]struct {
	user         string
	files, progs []string
}{
	// Ganesha serves files of every uid: root, as nfs/Makefile's IMAGE_USER.
	"nfs-provisioner": {user: "0:0", progs: []string{"usr/bin/ganesha.nfsd", "sbin/rpcbind"}, files: []string{
		"usr/bin/ganesha.nfsd", "sbin/rpcbind", "usr/bin/dbus-daemon", "sbin/rpc.statd", "sbin/sm-notify",
		// dbus-daemon reads both directories; Debian 13 (riscv64) ships it under /usr/share.
		"etc/dbus-1/system.d/nfs-ganesha-dbus.conf|usr/share/dbus-1/system.d/nfs-ganesha-dbus.conf", "var/lib/dpkg/status",
		// netbase: without them Ganesha cannot register with rpcbind.
		"etc/services", "etc/protocols", "etc/rpc", "etc/mtab",
	}},
}

// TestImages builds and pushes each provisioner's image once, then checks
// what was pushed. The builds run one after the other (the machine has few
// cores); each compiles its binary once per platform, and the Go build cache
// makes later runs mostly linking.
func TestImages(t *testing.T) {
	root, err := release.Root()
	if err != nil {
		t.Fatal(err)
	}
	provisioners, missing, err := release.Provisioners(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range missing {
		t.Errorf("%s has cmd/ but no Makefile including hack/build.make: its image cannot be built", dir)
	}
	if len(provisioners) == 0 {
		t.Fatal("found no provisioner directory with a Makefile including hack/build.make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed to build the images (apt-get install make)")
	}
	hostCA, err := os.ReadFile(caBundle)
	if err != nil {
		t.Fatalf("the images carry this machine's CA bundle: %v (apt-get install ca-certificates)", err)
	}

	// A real registry (the distribution API, in memory) on 127.0.0.1: the
	// push goes over HTTP like any other.
	// Without the OCI 1.1 referrers API, as many registries still are: the
	// SBOM and provenance go to the tag-schema fallback (sha256-<digest>).
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repoPrefix := host + "/" + namespace
	// With the referrers API, for one image (a second push costs a build).
	srv11 := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv11.Close)
	repoPrefix11 := strings.TrimPrefix(srv11.URL, "http://") + "/" + namespace

	ctx := testContext(t)
	revision, err := release.Run(ctx, root, nil, "git", "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	revision = strings.TrimSpace(revision)

	for _, p := range provisioners {
		t.Run(p.Dir, func(t *testing.T) {
			dir := filepath.Join(root, p.Dir)
			// The version make would compute, pinned for the whole subtest so
			// that a file edited meanwhile cannot change it between steps.
			version, err := release.Run(ctx, dir, nil, "make", "-s", "version")
			if err != nil {
				t.Fatal(err)
			}
			version = strings.TrimSpace(version)
			vars := []string{"REGISTRY=" + repoPrefix, "VERSION=" + version, "REVISION=" + revision}
			platforms := allPlatforms
			if !slices.Contains(allPlatformDirs, p.Dir) {
				platforms = fewPlatforms
				vars = append(vars, "PLATFORMS="+strings.Join(fewPlatforms, " "))
			}
			ref, err := release.Run(ctx, dir, nil, "make", append([]string{"-s", "image-ref"}, vars...)...)
			if err != nil {
				t.Fatal(err)
			}
			ref = strings.TrimSpace(ref)
			wantRef := repoPrefix + "/" + p.Binary + ":" + strings.ReplaceAll(version, "+", "-")
			if ref != wantRef {
				t.Errorf("make image-ref = %s, want %s (default TAG is the version with + replaced)", ref, wantRef)
			}

			started := time.Now()
			if _, err := release.Run(ctx, dir, nil, "make", append([]string{"push"}, vars...)...); err != nil {
				t.Fatal(err)
			}
			t.Logf("make push of %s took %s", p.Binary, time.Since(started).Round(time.Second))

			want := imageWant{
				platforms: platforms,
				binary:    p.Binary,
				version:   version,
				revision:  revision,
				caBundle:  hostCA,
			}
			checkIndex(ctx, t, ref, want)
			if p.Dir == "hostpath" {
				vars[0] = "REGISTRY=" + repoPrefix11
				if _, err := release.Run(ctx, dir, nil, "make", append([]string{"push"}, vars...)...); err != nil {
					t.Fatal(err)
				}
				checkIndex(ctx, t, strings.Replace(ref, repoPrefix, repoPrefix11, 1), want)
			}
		})
	}
}

type imageWant struct {
	platforms                 []string
	binary, version, revision string
	caBundle                  []byte
}

// checkIndex reads ref back from the registry and checks every platform.
func checkIndex(ctx context.Context, t *testing.T, ref string, want imageWant) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("reading the image index %s: %v", ref, err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range manifest.Manifests {
		if desc.Platform == nil {
			t.Errorf("index entry %s has no platform", desc.Digest)
			continue
		}
		platform := desc.Platform.String()
		platforms = append(platforms, platform)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatalf("%s: %v", platform, err)
		}
		binary, dpkgStatus := checkImage(t, platform, img, want)
		checkAttestations(ctx, t, r.Context().Digest(desc.Digest.String()), platform, attested{
			binary: binary, dpkgStatus: dpkgStatus, revision: want.revision,
		})
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, want.platforms) {
		t.Errorf("index %s has platforms %v, want %v", ref, platforms, want.platforms)
	}
}

// checkImage checks the configuration and the files of one platform's
// image, and runs the amd64 binary with --version. It returns the binary
// and dpkg's status file (nil in images without Debian packages).
func checkImage(t *testing.T, platform string, img v1.Image, want imageWant) (binary, dpkgStatus []byte) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("%s: %v", platform, err)
	}
	if got := cfg.Platform().String(); got != platform {
		t.Errorf("%s: the configuration says %s", platform, got)
	}
	if got, w := cfg.Config.Entrypoint, []string{entrypoint + want.binary}; !slices.Equal(got, w) {
		t.Errorf("%s: entrypoint %q, want %q", platform, got, w)
	}
	wantUser := nonRoot
	osImage, hasOS := osImages[want.binary]
	if hasOS {
		wantUser = osImage.user
	}
	if cfg.Config.User != wantUser {
		t.Errorf("%s: user %q, want %s", platform, cfg.Config.User, wantUser)
	}
	for label, w := range map[string]string{
		"org.opencontainers.image.source":   sourceURL,
		"org.opencontainers.image.version":  want.version,
		"org.opencontainers.image.revision": want.revision,
	} {
		if got := cfg.Config.Labels[label]; got != w {
			t.Errorf("%s: label %s=%q, want %q", platform, label, got, w)
		}
	}

	files, err := imageFiles(img)
	if err != nil {
		t.Fatalf("%s: reading the layers: %v", platform, err)
	}
	if f, ok := files[caBundle[1:]]; !ok || !bytes.Equal(f.data, want.caBundle) {
		t.Errorf("%s: %s is missing or differs from this machine's bundle", platform, caBundle)
	}
	if f := files["etc/passwd"]; !strings.Contains(string(f.data), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot user 65532:\n%s", platform, f.data)
	}
	if f := files["etc/group"]; !strings.Contains(string(f.data), "nonroot:x:65532:") {
		t.Errorf("%s: /etc/group has no nonroot group 65532:\n%s", platform, f.data)
	}
	if f, ok := files["tmp"]; !ok || f.mode&fs.ModeDir == 0 || f.mode&(fs.ModePerm|fs.ModeSticky) != fs.ModePerm|fs.ModeSticky {
		t.Errorf("%s: /tmp is missing or not a world-writable sticky directory (mode %v)", platform, f.mode)
	}
	for _, f := range osImage.files {
		if !slices.ContainsFunc(strings.Split(f, "|"), func(f string) bool { return exists(files, f) }) {
			t.Errorf("%s: the image has no /%s", platform, strings.ReplaceAll(f, "|", " or /"))
		}
	}
	for _, f := range osImage.progs {
		if prog, ok := lookup(files, f); ok {
			checkELF(t, platform+" /"+f, platform, prog.data, false)
		}
	}
	if hasOS {
		checkSuites(t, platform, cfg.Config.Labels[suitesLabel])
	}
	if hasOS && !strings.Contains(string(files["etc/passwd"].data), "messagebus:x:") {
		t.Errorf("%s: /etc/passwd lacks the users of the packages:\n%s", platform, files["etc/passwd"].data)
	}
	bin, ok := files[strings.TrimPrefix(entrypoint, "/")+want.binary]
	if !ok {
		t.Fatalf("%s: the image has no %s%s", platform, entrypoint, want.binary)
		return nil, nil
	}
	if bin.mode&0o111 == 0 {
		t.Errorf("%s: the binary is not executable (mode %v)", platform, bin.mode)
	}
	checkELF(t, platform, platform, bin.data, true)
	checkGoBuild(t, platform, bin.data)
	if platform == "linux/amd64" {
		checkVersion(t, bin.data, want)
	}
	return bin.data, files["var/lib/dpkg/status"].data
}

// checkELF: a program for the platform's machine, word size and byte order
// (a kernel of another refuses it: "exec format error"); static if asked.
func checkELF(t *testing.T, what, platform string, data []byte, static bool) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: not ELF: %v", what, err)
		return
	}
	defer f.Close()
	want, ok := elfTargets[platform]
	if !ok {
		t.Errorf("%s: no ELF target known for %s", what, platform)
		return
	}
	if f.Machine != want.machine || f.Class != want.class || f.ByteOrder != want.order {
		t.Errorf("%s: ELF for %v %v %v, want %v %v %v", what, f.Machine, f.Class, f.ByteOrder, want.machine, want.class, want.order)
	}
	for _, p := range f.Progs {
		if static && p.Type == elf.PT_INTERP {
			t.Errorf("%s: dynamically linked (CGO_ENABLED=0 is required)", what)
		}
	}
}

// checkGoBuild reads the Go build settings stamped into the binary: GOARCH
// and, for arm/v7, GOARM=7 (the variant the index promises: a GOARM=5
// binary would run, slowly, and one built for v8 would not).
func checkGoBuild(t *testing.T, platform string, data []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Errorf("%s: reading the Go build information: %v", platform, err)
		return
	}
	want := elfTargets[platform]
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for key, w := range map[string]string{"GOOS": "linux", "GOARCH": want.goarch, "GOARM": want.goarm, "CGO_ENABLED": "0"} {
		if settings[key] != w {
			t.Errorf("%s: the binary was built with %s=%q, want %q", platform, key, settings[key], w)
		}
	}
}

// suitesLabel names the Debian suites an OS image's packages came from
// (hack/debian-rootfs.sh leaves out a suite whose index did not verify).
const suitesLabel = "io.kubeprov.debian.suites"

func checkSuites(t *testing.T, platform, label string) {
	t.Helper()
	suite := debianSuite(platform)
	suites := strings.Split(label, ",")
	if suites[0] != suite {
		t.Errorf("%s: label %s=%q, want %s first", platform, suitesLabel, label, suite)
	}
	for _, s := range suites[1:] {
		if s != suite+"-updates" && s != suite+"-security" {
			t.Errorf("%s: label %s=%q names %q, want only %s-updates and %s-security after %s", platform, suitesLabel, label, s, suite, suite, suite)
		}
	}
	if !slices.Contains(suites, suite+"-security") {
		t.Logf("%s: built without %s-security (its index did not verify): %s=%s", platform, suite, suitesLabel, label)
	}
}

// checkVersion runs the binary taken out of the image.
func checkVersion(t *testing.T, data []byte, want imageWant) {
	t.Helper()
	path := filepath.Join(t.TempDir(), want.binary)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", want.binary, err, out)
	}
	prefix := fmt.Sprintf("%s %s (revision %s, go", want.binary, want.version, want.revision)
	if !strings.HasPrefix(string(out), prefix) || !strings.Contains(string(out), "linux/amd64)") {
		t.Errorf("%s --version printed %q, want %q...linux/amd64)", want.binary, out, prefix)
	}
}

type imageFile struct {
	mode fs.FileMode
	data []byte
	link string // a symbolic link's target
}

// lookup finds name as a process in the image would, through symbolic links
// of its directories (Debian 13's /sbin -> usr/sbin).
func lookup(files map[string]imageFile, name string) (imageFile, bool) {
	for range 8 {
		f, ok := files[name]
		if ok && f.link == "" {
			return f, true
		}
		if ok {
			name = resolveLink(name, f.link)
			continue
		}
		resolved := false
		for dir := filepath.Dir(name); dir != "."; dir = filepath.Dir(dir) {
			if d, ok := files[dir]; ok && d.link != "" {
				name = filepath.Join(resolveLink(dir, d.link), strings.TrimPrefix(name, dir+"/"))
				resolved = true
				break
			}
		}
		if !resolved {
			return imageFile{}, false
		}
	}
	return imageFile{}, false
}

// exists: name is in the image itself (a dangling link too, as /etc/mtab is
// until /proc is mounted) or through a link of its directories.
func exists(files map[string]imageFile, name string) bool {
	if _, ok := files[name]; ok {
		return true
	}
	_, ok := lookup(files, name)
	return ok
}

func resolveLink(name, target string) string {
	if filepath.IsAbs(target) {
		return strings.TrimPrefix(filepath.Clean(target), "/")
	}
	return filepath.Join(filepath.Dir(name), target)
}

// imageFiles flattens the image's layers (later layers win), without the
// leading "/" and trailing "/" of tar names.
func imageFiles(img v1.Image) (map[string]imageFile, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		name := strings.Trim(hdr.Name, "/")
		f := imageFile{mode: hdr.FileInfo().Mode(), data: data}
		if hdr.Typeflag == tar.TypeSymlink {
			f.link = hdr.Linkname
		}
		files[strings.TrimPrefix(name, "./")] = f
	}
}

// testContext ends a little before the test binary's deadline so that a
// hanging build fails with its output rather than a panic.
func testContext(t *testing.T) context.Context {
	deadline, ok := t.Deadline()
	if !ok {
		return t.Context()
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(-30*time.Second))
	t.Cleanup(cancel)
	return ctx
}
