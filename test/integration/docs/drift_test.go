// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	cinderapp "github.com/kubeprov/external-storage/cinder/app"
	csiapp "github.com/kubeprov/external-storage/csi/app"
	flexapp "github.com/kubeprov/external-storage/flex/app"
	hostpathapp "github.com/kubeprov/external-storage/hostpath/app"
	nfsapp "github.com/kubeprov/external-storage/nfs/app"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// root is the repository, from this package's directory.
const root = "../../.."

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// libPackages lists lib's Go packages (directories with non-test Go
// files), relative to lib, such as "controller" and "podrun/podruntest".
func libPackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	lib := filepath.Join(root, "lib")
	err := filepath.WalkDir(lib, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(lib, filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel != "." && !slices.Contains(pkgs, filepath.ToSlash(rel)) {
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pkgs)
	return pkgs
}

// compareSets reports what only one side of a doc-versus-code comparison has.
func compareSets(t *testing.T, doc string, documented, actual []string) {
	t.Helper()
	for _, a := range actual {
		if !slices.Contains(documented, a) {
			t.Errorf("%s does not list %s, which exists", doc, a)
		}
	}
	for _, d := range documented {
		if !slices.Contains(actual, d) {
			t.Errorf("%s lists %s, which does not exist", doc, d)
		}
	}
}

// TestLibPackagesDocumented: lib/README.md's package table names every
// package of lib and no other, and docs/development.md's layout names
// every top-level one and no other.
func TestLibPackagesDocumented(t *testing.T) {
	pkgs := libPackages(t)
	if len(pkgs) < 5 {
		t.Fatalf("found packages %v under lib: the walk is broken", pkgs)
	}

	readme := readDoc(t, "lib/README.md")
	start := strings.Index(readme, "## Packages")
	if start < 0 {
		t.Fatal(`lib/README.md has no "## Packages" section`)
	}
	section := readme[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	var table []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9/]+)` \\|").FindAllStringSubmatch(section, -1) {
		table = append(table, m[1])
	}
	compareSets(t, "lib/README.md's package table", table, pkgs)

	var top []string
	for _, p := range pkgs {
		if first, _, _ := strings.Cut(p, "/"); !slices.Contains(top, first) {
			top = append(top, first)
		}
	}
	dev := readDoc(t, "docs/development.md")
	entry := regexp.MustCompile(`(?m)^lib/ +((?:.*\n)(?: {11}.*\n)*)`).FindStringSubmatch(dev)
	if entry == nil {
		t.Fatal("docs/development.md's layout has no lib/ entry")
	}
	var layout []string
	for _, m := range regexp.MustCompile(`\b([a-z][a-z0-9]*)/`).FindAllStringSubmatch(entry[1], -1) {
		layout = append(layout, m[1])
	}
	compareSets(t, "docs/development.md's layout of lib/", layout, top)
}

// binaries are the provisioners' commands, by the README that documents
// their flags.
var binaries = map[string]func() *cobra.Command{
	"cinder/README.md":   cinderapp.NewCommand,
	"csi/README.md":      csiapp.NewCommand,
	"flex/README.md":     flexapp.NewCommand,
	"hostpath/README.md": hostpathapp.NewCommand,
	"nfs/README.md":      nfsapp.NewCommand,
}

// flagRow is one row of a README's flag table: the flags it names and the
// defaults it gives them, in order.
type flagRow struct {
	line     int
	names    []string
	defaults []string
	prose    string // the default cell when it holds no code span
}

var (
	flagTableHeader = regexp.MustCompile(`(?i)^\|\s*flag\s*\|\s*default\s*\|`)
	codeSpan        = regexp.MustCompile("`([^`]*)`")
)

// flagTables reads every table of doc whose first columns are Flag and
// Default.
func flagTables(doc string) []flagRow {
	var rows []flagRow
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if !flagTableHeader.MatchString(lines[i]) {
			continue
		}
		for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			cells := strings.Split(strings.ReplaceAll(lines[i], `\|`, "\x00"), "|")
			if len(cells) < 3 {
				continue
			}
			row := flagRow{line: i + 1}
			var first []string
			for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
				name := m[1]
				switch {
				case strings.HasPrefix(name, "--"):
					name = strings.TrimPrefix(name, "--")
					first = strings.Split(name, "-")
				case strings.HasPrefix(name, "-") && len(name) > 2 && first != nil:
					// `-renew-deadline` after `--leader-election-lease-duration`:
					// the same stem, the same number of trailing words replaced.
					tail := strings.Split(strings.TrimPrefix(name, "-"), "-")
					name = strings.Join(append(slices.Clone(first[:max(len(first)-len(tail), 0)]), tail...), "-")
				default:
					name = strings.TrimPrefix(name, "-")
				}
				row.names = append(row.names, name)
			}
			for _, m := range codeSpan.FindAllStringSubmatch(cells[2], -1) {
				row.defaults = append(row.defaults, m[1])
			}
			if len(row.defaults) == 0 {
				row.prose = strings.TrimSpace(cells[2])
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// sameDefault compares a documented default with a flag's DefValue:
// durations by value (`2m` is 2m0s), `""` as empty.
func sameDefault(doc, actual string) bool {
	if doc == `""` {
		doc = ""
	}
	if doc == actual {
		return true
	}
	d, err1 := time.ParseDuration(doc)
	a, err2 := time.ParseDuration(actual)
	return err1 == nil && err2 == nil && d == a
}

// emptyDefault is what a flag with no value of its own shows in --help.
func emptyDefault(v string) bool { return v == "" || v == "[]" || v == "0" || v == "false" }

// TestFlagTablesMatchBinaries: every row of every flag table in a
// provisioner's README names flags its binary has, with the defaults
// --help shows; a row whose default is prose, not code ("the pod's
// namespace", "(required)"), is for a flag whose own default is empty. And
// every flag of the binary, other than the Kubernetes logging flags, is
// named in the README.
func TestFlagTablesMatchBinaries(t *testing.T) {
	for readme, newCommand := range binaries {
		t.Run(filepath.Dir(readme), func(t *testing.T) {
			doc := readDoc(t, readme)
			cmd := newCommand()
			// cobra adds these when the command runs; --help lists them.
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			flags := cmd.Flags()
			rows := flagTables(doc)
			if len(rows) < 5 {
				t.Fatalf("%s: found %d flag table rows, want its flag table", readme, len(rows))
			}
			for _, row := range rows {
				if len(row.names) == 0 {
					t.Errorf("%s:%d: a flag table row names no flag", readme, row.line)
				}
				for i, name := range row.names {
					f := flags.Lookup(name)
					if f == nil {
						t.Errorf("%s:%d: --%s is not a flag of the binary", readme, row.line, name)
						continue
					}
					var want string
					switch {
					case len(row.defaults) == len(row.names):
						want = row.defaults[i]
					case len(row.defaults) > 0 && i == 0:
						want = row.defaults[0]
					case len(row.defaults) > 0:
						continue
					default:
						if !emptyDefault(f.DefValue) {
							t.Errorf("%s:%d: --%s: the table's default is %q, --help's is %q", readme, row.line, name, row.prose, f.DefValue)
						}
						continue
					}
					if strings.Contains(want, "<") {
						continue // a placeholder: <provisioner>/<namespace>
					}
					if !sameDefault(want, f.DefValue) {
						t.Errorf("%s:%d: --%s: the table's default is %q, --help's is %q", readme, row.line, name, want, f.DefValue)
					}
				}
			}
			flags.VisitAll(func(f *pflag.Flag) {
				if loggingFlag(f.Name) || f.Name == "help" || f.Hidden || f.Deprecated != "" {
					return
				}
				if !mentioned(doc, f.Name) {
					t.Errorf("%s does not name --%s, a flag of the binary", readme, f.Name)
				}
			})
		})
	}
}

// loggingFlag: the flags of k8s.io/component-base/logs, the same in every
// Kubernetes component, which the READMEs refer to as a family.
func loggingFlag(name string) bool {
	return name == "v" || name == "vmodule" || name == "logging-format" || strings.HasPrefix(name, "log-")
}

// mentioned tells whether doc names a flag, spelled out or in the READMEs'
// shorthands: `--leader-election*`, `--kube-api-qps/burst`,
// `--leader-election-lease-duration/-renew-deadline`.
func mentioned(doc, name string) bool {
	if regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b[^-]`).MatchString(doc) {
		return true
	}
	words := strings.Split(name, "-")
	for i := 1; i < len(words); i++ {
		stem, tail := strings.Join(words[:i], "-"), strings.Join(words[i:], "-")
		if strings.Contains(doc, "--"+stem+"*") {
			return true
		}
		if regexp.MustCompile(`--` + regexp.QuoteMeta(stem) + `-[a-z-]+(/-?[a-z-]+)*/-?` + regexp.QuoteMeta(tail) + `\b`).MatchString(doc) {
			return true
		}
		if regexp.MustCompile("`--" + regexp.QuoteMeta(stem) + "[a-z-]*`[^|]{0,200}?`-" + regexp.QuoteMeta(tail) + "`").MatchString(doc) {
			return true
		}
	}
	return false
}

// docs are the Markdown files of the repository (not test/ports' own,
// which belong to their modules, nor build outputs).
func docs(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "_output" || d.Name() == "node_modules" || rel == "test/ports") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// code returns the code spans and code blocks of a Markdown document.
func code(doc string) []string {
	var out []string
	blocks := regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	comment := regexp.MustCompile(`(?m)(^|\s)#.*$`)
	for _, m := range blocks.FindAllStringSubmatch(doc, -1) {
		out = append(out, comment.ReplaceAllString(m[1], ""))
	}
	for _, m := range codeSpan.FindAllStringSubmatch(blocks.ReplaceAllString(doc, ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// makeCommand is a make invocation a doc shows.
type makeCommand struct {
	dir     string
	targets []string
	vars    []string
}

var makeInvocation = regexp.MustCompile(`(?m)(?:^|[\s(;&|$])make((?:[ \t]+[^\s;&|#)` + "`" + `]+)*)`)

func makeCommands(doc string) []makeCommand {
	var cmds []makeCommand
	for _, c := range code(doc) {
		for _, m := range makeInvocation.FindAllStringSubmatch(c, -1) {
			var mc makeCommand
			words := strings.Fields(m[1])
			for i := 0; i < len(words); i++ {
				w := words[i]
				switch {
				case w == "-C" && i+1 < len(words):
					mc.dir = words[i+1]
					i++
				case strings.HasPrefix(w, "-"):
				case strings.Contains(w, "="):
					name, _, _ := strings.Cut(w, "=")
					mc.vars = append(mc.vars, name)
				case strings.ContainsAny(w, "<>…*\"'") || strings.HasSuffix(w, ","), w == "..." || w == "/":
					// a placeholder (`make test/<module>`) or prose after the command
				default:
					mc.targets = append(mc.targets, strings.TrimRight(w, ".:"))
				}
			}
			cmds = append(cmds, mc)
		}
	}
	return cmds
}

// TestDocsMakeCommandsExist: every make target a doc shows exists (make -q
// answers "No rule to make target" for one that does not) in the directory
// it is run in, and is listed by that directory's make help unless it is an
// instance of a pattern rule (test/lib, image/nfs); every VAR=value a doc
// passes is read by the Makefiles or by what they run.
func TestDocsMakeCommandsExist(t *testing.T) {
	readers := readers(t)
	checked := map[string]bool{}
	count := 0
	for _, doc := range docs(t) {
		for _, mc := range makeCommands(readDoc(t, doc)) {
			// Without -C a command runs at the root or, as the docs say
			// around it, in a provisioner's directory (hack/build.make's
			// targets; rootfs only where DEBIAN_PACKAGES is set, as in nfs).
			dirs := []string{".", "hostpath", "nfs"}
			if mc.dir != "" {
				dirs = []string{mc.dir}
			}
			for _, target := range mc.targets {
				key := strings.Join(dirs, ",") + " " + target
				if checked[key] {
					continue
				}
				checked[key] = true
				count++
				i := slices.IndexFunc(dirs, func(dir string) bool { return hasTarget(dir, target) })
				if i < 0 {
					t.Errorf("%s: make %s: no Makefile in %v has that target", doc, target, dirs)
					continue
				}
				if !strings.Contains(target, "/") && !slices.Contains(helpTargets(t, dirs[i]), target) {
					t.Errorf("%s: make %s: make help in %s does not list it", doc, target, dirs[i])
				}
			}
			for _, v := range mc.vars {
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`).MatchString(readers) {
					t.Errorf("%s: make %s=...: nothing the Makefiles run reads %s", doc, v, v)
				}
			}
		}
	}
	if count < 10 {
		t.Fatalf("checked %d make targets: the docs' commands are no longer found", count)
	}
}

// hasTarget asks make whether the Makefile in dir has target: make -q
// runs no recipe and answers "No rule to make target" for one it lacks.
func hasTarget(dir, target string) bool {
	out, err := exec.Command("make", "-q", "-C", filepath.Join(root, dir), target).CombinedOutput()
	return err == nil || !bytes.Contains(out, []byte("No rule to make target"))
}

// helpTargets lists the targets make help prints in dir.
func helpTargets(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("make", "-s", "--no-print-directory", "-C", filepath.Join(root, dir), "help").Output()
	if err != nil {
		t.Fatalf("make help in %s: %v", dir, err)
	}
	var targets []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			targets = append(targets, f[0])
		}
	}
	return targets
}

// readers is the text of everything that reads make's command-line
// variables: the Makefiles, hack/'s scripts, and test/cmd's programs, which
// make runs with its variables in their environment.
func readers(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, pattern := range []string{"Makefile", "*/Makefile", "hack/*.make", "hack/*.sh", "hack/*/*.sh", "test/cmd/*/*.go"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
	}
	return b.String()
}

var (
	mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	// Not paths: release tags (lib/v0.1.0, lib/vX.Y.Z) and Go symbols
	// (lib/httpendpoint.NewHandler).
	releaseTag = regexp.MustCompile(`/v(\d|X)`)
	goSymbol   = regexp.MustCompile(`\.[A-Z]`)
	repoPath   = regexp.MustCompile(`^(?:lib|csi|cinder|hostpath|flex|nfs|test|docs|charts|hack)/[A-Za-z0-9_./-]*[A-Za-z0-9_/]$`)
)

// TestDocsNameFilesThatExist: every relative link of a doc, and every path
// of the repository a doc shows as code (`nfs/Makefile`, `hack/deps/`),
// exists (or, for `test/csi`, is a make target): a file removed or renamed
// takes its mentions with it.
func TestDocsNameFilesThatExist(t *testing.T) {
	count := 0
	for _, doc := range docs(t) {
		text := readDoc(t, doc)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			count++
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, target)
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			path := m[1]
			if !repoPath.MatchString(path) || releaseTag.MatchString(path) || goSymbol.MatchString(path) {
				continue
			}
			count++
			if _, err := os.Stat(filepath.Join(root, path)); err != nil && !hasTarget(".", path) {
				t.Errorf("%s names %s, which is neither a file nor a make target", doc, path)
			}
		}
	}
	if count < 50 {
		t.Fatalf("checked %d paths: the docs' links are no longer found", count)
	}
}

// podSecurityRow is a row of docs/architecture.md's Pod Security table.
type podSecurityRow struct{ namespace, dir, level string }

var podSecurityTableRow = regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| `([a-z/-]+)` \\| `(restricted|baseline|privileged)` \\|")

// TestPodSecurityLevelsDocumented: docs/architecture.md's table of Pod
// Security levels says, for every namespace a provisioner's kustomization
// creates, the level that kustomization enforces, and nothing else.
func TestPodSecurityLevelsDocumented(t *testing.T) {
	var rows []podSecurityRow
	for _, m := range podSecurityTableRow.FindAllStringSubmatch(readDoc(t, "docs/architecture.md"), -1) {
		rows = append(rows, podSecurityRow{namespace: m[1], dir: m[2], level: m[3]})
	}
	if len(rows) < 5 {
		t.Fatalf("found %d rows of the Pod Security table in docs/architecture.md", len(rows))
	}
	dirs, err := filepath.Glob(filepath.Join(root, "*", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	var rendered []podSecurityRow
	for _, deploy := range dirs {
		err := filepath.WalkDir(deploy, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
				return err
			}
			kdir, _ := filepath.Rel(root, filepath.Dir(path))
			if strings.HasPrefix(kdir, "lib/") {
				return nil // a kustomize component, not installed alone
			}
			objs, err := manifests.Render(filepath.Dir(path))
			if err != nil {
				return fmt.Errorf("rendering %s: %w", kdir, err)
			}
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					rendered = append(rendered, podSecurityRow{o.GetName(), filepath.ToSlash(kdir), o.GetLabels()["pod-security.kubernetes.io/enforce"]})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, row := range rows {
		if !slices.Contains(rendered, row) {
			t.Errorf("docs/architecture.md: %s renders no namespace %s at level %s", row.dir, row.namespace, row.level)
		}
	}
	for _, r := range rendered {
		if !slices.ContainsFunc(rows, func(row podSecurityRow) bool { return row.namespace == r.namespace && row.level == r.level }) {
			t.Errorf("docs/architecture.md does not say that %s creates namespace %s at level %q", r.dir, r.namespace, r.level)
		}
	}
}

var tableSeparator = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

// TestDocsTablesAreWhole: every run of table rows in a doc (outside code
// blocks) starts with a header and its |---| line, so that a paragraph
// dropped into the middle of a table, which makes the rows after it plain
// text, fails here instead of on a reader.
func TestDocsTablesAreWhole(t *testing.T) {
	fence := regexp.MustCompile("(?s)```.*?```")
	for _, doc := range docs(t) {
		lines := strings.Split(fence.ReplaceAllStringFunc(readDoc(t, doc), func(block string) string {
			return strings.Repeat("\n", strings.Count(block, "\n"))
		}), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "|") || (i > 0 && strings.HasPrefix(lines[i-1], "|")) {
				continue
			}
			if i+1 >= len(lines) || !tableSeparator.MatchString(lines[i+1]) {
				t.Errorf("%s:%d: table rows without a header and |---| line (a table cut in two?): %.60s", doc, i+1, lines[i])
			}
		}
	}
}

// TestLibNeverExitsOrPanics: lib/README.md promises that the library never
// calls os.Exit or klog.Fatal nor panics on its caller's input; no code of
// lib (tests aside) calls panic, os.Exit or a Fatal logger.
func TestLibNeverExitsOrPanics(t *testing.T) {
	if !strings.Contains(readDoc(t, "lib/README.md"), "never calls `os.Exit` or `klog.Fatal`") {
		t.Fatal("lib/README.md no longer makes the promise this test keeps: update the test")
	}
	forbidden := regexp.MustCompile(`\bpanic\(|\bos\.Exit\(|\bklog\.(Fatal|Exit)|\blog\.Fatal`)
	err := filepath.WalkDir(filepath.Join(root, "lib"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if forbidden.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: %s, which lib/README.md says the library never does", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSupportedKubernetesVersions: README.md states the Kubernetes range
// that hack/lib/versions.sh builds and make test runs, at least the three
// newest minors without a gap, and the libraries the modules compile
// against are the newest one's.
func TestSupportedKubernetesVersions(t *testing.T) {
	m := regexp.MustCompile(`(?m)^K8S_SUPPORTED_VERSIONS=\(([^)]*)\)`).FindStringSubmatch(readDoc(t, "hack/lib/versions.sh"))
	if m == nil {
		t.Fatal("hack/lib/versions.sh sets no K8S_SUPPORTED_VERSIONS=(...)")
	}
	versions := strings.Fields(m[1])
	var minors []string
	for i, v := range versions {
		minor := minorOf(t, v)
		if i > 0 && minor != minorOf(t, versions[0])-i {
			t.Errorf("K8S_SUPPORTED_VERSIONS %v: want consecutive minors, newest first", versions)
		}
		minors = append(minors, fmt.Sprintf("1.%d", minor))
	}
	if len(versions) < 3 {
		t.Errorf("K8S_SUPPORTED_VERSIONS %v: want at least the three newest minors", versions)
	}

	readme := readDoc(t, "README.md")
	_, section, ok := strings.Cut(readme, "## Supported Kubernetes versions\n")
	if !ok {
		t.Fatal(`README.md has no "## Supported Kubernetes versions" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	slices.Reverse(minors)
	if stated := strings.Join(minors[:len(minors)-1], ", ") + " and " + minors[len(minors)-1]; !strings.Contains(section, stated) {
		t.Errorf("README.md's supported versions do not say %q (hack/lib/versions.sh):\n%s", stated, section)
	}
	newest, oldest := versions[0], versions[len(versions)-1]
	for _, want := range []string{strings.TrimPrefix(newest, "v"), strings.TrimPrefix(oldest, "v"), "make test-oldest"} {
		if !strings.Contains(section, want) {
			t.Errorf("README.md's supported versions do not name %s, which make test runs", want)
		}
	}

	out, err := exec.Command("make", "-s", "-C", root, "test-phases").Output()
	if err != nil {
		t.Fatalf("make test-phases: %v", err)
	}
	if phases := strings.Fields(string(out)); !slices.Contains(phases, "test-oldest") {
		t.Errorf("make test runs the phases %v, none on the oldest supported Kubernetes (test-oldest)", phases)
	}
	if out, err := exec.Command("make", "-s", "-C", root, "-n", "test-oldest").Output(); err != nil || !strings.Contains(string(out), "KUBEPROV_KUBE_VERSION="+oldest) {
		t.Errorf("make test-oldest does not run on %s (%v):\n%s", oldest, err, out)
	}

	clientGo := regexp.MustCompile(`(?m)^\s*k8s.io/client-go v0\.(\d+)\.`).FindStringSubmatch(readDoc(t, "lib/go.mod"))
	if clientGo == nil || "1."+clientGo[1] != minors[len(minors)-1] {
		t.Errorf("lib/go.mod requires client-go %v, want the newest supported minor %s", clientGo, newest)
	}
}

// minorOf returns the minor of a v1.MINOR.PATCH version.
func minorOf(t *testing.T, v string) int {
	t.Helper()
	var minor, patch int
	if _, err := fmt.Sscanf(v, "v1.%d.%d", &minor, &patch); err != nil {
		t.Fatalf("%q is not v1.MINOR.PATCH: %v", v, err)
	}
	return minor
}
