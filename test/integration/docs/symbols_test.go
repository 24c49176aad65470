// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// parseDir parses the non-test Go files of a directory of the repository,
// with their comments.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// interfaceDecls returns the interface types files declare, by name.
func interfaceDecls(files []*ast.File) map[string]*ast.TypeSpec {
	decls := map[string]*ast.TypeSpec{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if gd, ok := n.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						if ts.Doc == nil {
							ts.Doc = gd.Doc
						}
						decls[ts.Name.Name] = ts
					}
				}
			}
			return true
		})
	}
	return decls
}

// isProvisioner tells whether x is the controller's provisioner: the
// variable `provisioner` or a field `.provisioner`.
func isProvisioner(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "provisioner"
	case *ast.SelectorExpr:
		return x.Sel.Name == "provisioner"
	}
	return false
}

// optionalInterfaces returns the interfaces lib/controller finds on the
// provisioner by type assertion (`c.provisioner.(X)`, or a type switch on
// it), sorted: what its docs must list as optional.
func optionalInterfaces(t *testing.T) ([]string, map[string]*ast.TypeSpec) {
	t.Helper()
	files := parseDir(t, "lib/controller")
	decls := interfaceDecls(files)
	var found []string
	add := func(e ast.Expr) {
		if id, ok := e.(*ast.Ident); ok && decls[id.Name] != nil && !slices.Contains(found, id.Name) {
			found = append(found, id.Name)
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil && isProvisioner(n.X) {
					add(n.Type)
				}
			case *ast.TypeSwitchStmt:
				var assert ast.Expr
				switch s := n.Assign.(type) {
				case *ast.AssignStmt:
					assert = s.Rhs[0]
				case *ast.ExprStmt:
					assert = s.X
				}
				if ta, ok := assert.(*ast.TypeAssertExpr); ok && isProvisioner(ta.X) {
					for _, c := range n.Body.List {
						for _, e := range c.(*ast.CaseClause).List {
							add(e)
						}
					}
				}
			}
			return true
		})
	}
	if len(found) < 5 {
		t.Fatalf("found %v asserted on the provisioner in lib/controller: the search is broken", found)
	}
	slices.Sort(found)
	return found, decls
}

// listAfter returns the code spans of the parenthesised list that follows
// marker in text.
func listAfter(t *testing.T, where, text, marker string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(text, marker)
	if !ok {
		t.Fatalf("%s no longer says %q: update the test", where, marker)
	}
	list, _, _ := strings.Cut(rest, ")")
	var names []string
	for _, m := range regexp.MustCompile("`?([A-Z][A-Za-z]+)`?").FindAllStringSubmatch(list, -1) {
		names = append(names, m[1])
	}
	return names
}

var optionalInterfaceRow = regexp.MustCompile("(?m)^\\| `controller\\.([A-Za-z]+)` \\| ([^|]*)\\|")

// TestOptionalInterfacesDocumented: every interface lib/controller finds on
// the provisioner by type assertion, and no other, is listed in
// lib/README.md's package table, in the guide's table of optional
// interfaces (with its own methods) and in the Provisioner interface's doc
// comment: a new optional interface is found by no reader otherwise.
func TestOptionalInterfacesDocumented(t *testing.T) {
	optional, decls := optionalInterfaces(t)

	readme := readDoc(t, "lib/README.md")
	compareSets(t, "lib/README.md's controller row", listAfter(t, "lib/README.md", readme, "its optional interfaces ("), optional)

	provisioner := decls["Provisioner"]
	if provisioner == nil || provisioner.Doc == nil {
		t.Fatal("lib/controller declares no documented Provisioner interface")
	}
	compareSets(t, "the Provisioner interface's doc comment", listAfter(t, "Provisioner's doc comment", provisioner.Doc.Text(), "optional interfaces ("), optional)

	guide := readDoc(t, "docs/writing-a-provisioner.md")
	var rows []string
	for _, m := range optionalInterfaceRow.FindAllStringSubmatch(guide, -1) {
		rows = append(rows, m[1])
		decl := decls[m[1]]
		if decl == nil {
			continue
		}
		for _, field := range decl.Type.(*ast.InterfaceType).Methods.List {
			for _, name := range field.Names { // embedded interfaces have none
				if !strings.Contains(m[2], "`"+name.Name+"(") {
					t.Errorf("docs/writing-a-provisioner.md: the row of controller.%s does not show its method %s", m[1], name.Name)
				}
			}
		}
	}
	compareSets(t, "docs/writing-a-provisioner.md's optional interfaces", rows, optional)
}

// verbsByResource merges rules into the verbs each resource is granted
// (whatever the API group: the docs' tables name resources by plural).
func verbsByResource(rules []rbacv1.PolicyRule) map[string][]string {
	out := map[string][]string{}
	for _, r := range rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if !slices.Contains(out[res], v) {
					out[res] = append(out[res], v)
				}
			}
			slices.Sort(out[res])
		}
	}
	return out
}

// componentRules reads the rules a file of lib/deploy/rbac appends.
func componentRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	var ops []struct {
		Op    string            `json:"op"`
		Value rbacv1.PolicyRule `json:"value"`
	}
	if err := yaml.Unmarshal([]byte(readDoc(t, "lib/deploy/rbac/"+file)), &ops); err != nil {
		t.Fatalf("lib/deploy/rbac/%s: %v", file, err)
	}
	var rules []rbacv1.PolicyRule
	for _, op := range ops {
		rules = append(rules, op.Value)
	}
	return rules
}

// chartRules reads the rules a named template of the library chart gives.
func chartRules(t *testing.T, names ...string) []rbacv1.PolicyRule {
	t.Helper()
	helpers := readDoc(t, "charts/common/templates/_helpers.tpl")
	var rules []rbacv1.PolicyRule
	for _, name := range names {
		m := regexp.MustCompile(`(?s)\{\{- define "` + regexp.QuoteMeta(name) + `" -\}\}\n(.*?)\{\{- end \}\}`).FindStringSubmatch(helpers)
		if m == nil {
			t.Fatalf("charts/common defines no %s", name)
		}
		var list []rbacv1.PolicyRule
		if err := yaml.UnmarshalStrict([]byte(m[1]), &list); err != nil {
			t.Fatalf("charts/common %s: %v", name, err)
		}
		rules = append(rules, list...)
	}
	return rules
}

// rbacRow is a row of a doc's RBAC table: | resource | verbs | why |.
type rbacRow struct {
	line     int
	resource string
	verbs    []string
}

var (
	rbacHeader  = regexp.MustCompile(`^\|\s*resource\s*\|\s*verbs\s*\|`)
	parenthesis = regexp.MustCompile(`\([^)]*\)`)
)

// rbacTables returns each RBAC table of doc, as its rows.
func rbacTables(doc string) [][]rbacRow {
	var tables [][]rbacRow
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if !rbacHeader.MatchString(lines[i]) {
			continue
		}
		var rows []rbacRow
		for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			cells := strings.Split(lines[i], "|")
			row := rbacRow{line: i + 1, resource: regexp.MustCompile(`^[a-z]+`).FindString(strings.TrimSpace(cells[1]))}
			for _, v := range strings.Split(parenthesis.ReplaceAllString(cells[2], ""), ",") {
				row.verbs = append(row.verbs, strings.TrimSpace(v))
			}
			slices.Sort(row.verbs)
			rows = append(rows, row)
		}
		tables = append(tables, rows)
	}
	return tables
}

// TestRBACTablesMatchTheComponent: the library chart's rules are the
// kustomize component's, and in the guide and the migration guide each row
// of an RBAC table either says exactly what lib/deploy/rbac grants for its
// resource or names only verbs the component does not grant (a rule to add
// for a feature); the guide has a table of everything the component grants.
// A port that follows a table granting what the component does not, and
// skips the rules its features need, gets Forbidden.
func TestRBACTablesMatchTheComponent(t *testing.T) {
	cluster, namespaced := componentRules(t, "clusterrole.yaml"), componentRules(t, "role.yaml")
	if !reflect.DeepEqual(verbsByResource(cluster), verbsByResource(chartRules(t, "kubeprov.libClusterRules"))) {
		t.Errorf("charts/common's libClusterRules %v differ from lib/deploy/rbac/clusterrole.yaml's %v", verbsByResource(chartRules(t, "kubeprov.libClusterRules")), verbsByResource(cluster))
	}
	if !reflect.DeepEqual(verbsByResource(namespaced), verbsByResource(chartRules(t, "kubeprov.libJournalRule", "kubeprov.libLeaseRule"))) {
		t.Errorf("charts/common's libJournalRule and libLeaseRule differ from lib/deploy/rbac/role.yaml's %v", verbsByResource(namespaced))
	}
	grants := verbsByResource(append(cluster, namespaced...))
	if len(grants) < 5 {
		t.Fatalf("lib/deploy/rbac grants %v: the reading is broken", grants)
	}
	whole := false
	for _, doc := range []string{"docs/writing-a-provisioner.md", "docs/migrating.md"} {
		tables := rbacTables(readDoc(t, doc))
		if len(tables) == 0 {
			t.Fatalf("%s has no RBAC table (| resource | verbs | ...)", doc)
		}
		for _, rows := range tables {
			documented := map[string][]string{}
			for _, row := range rows {
				documented[row.resource] = row.verbs
				granted := grants[row.resource]
				if slices.Equal(row.verbs, granted) {
					continue
				}
				for _, v := range row.verbs {
					if slices.Contains(granted, v) {
						t.Errorf("%s:%d: %s %v: lib/deploy/rbac grants %v; a row says exactly that, or names only verbs to add", doc, row.line, row.resource, row.verbs, granted)
						break
					}
				}
			}
			whole = whole || doc == "docs/writing-a-provisioner.md" && reflect.DeepEqual(documented, grants)
		}
	}
	if !whole {
		t.Errorf("docs/writing-a-provisioner.md has no RBAC table of exactly what lib/deploy/rbac grants: %v", grants)
	}
}

var (
	summaryRow = regexp.MustCompile(`(?m)^\| ([a-z][^|]*[a-z]) \| ([0-9][0-9.]*) \| ([^|]*)\|$`)
	figure     = regexp.MustCompile(`\b[0-9][0-9.,]*[0-9]\b|\b[0-9]\b`)
)

// performanceSummary reads the figures of docs/performance.md's summary, by
// measure, and the rest of that file.
func performanceSummary(t *testing.T) (map[string]string, string) {
	t.Helper()
	perf := readDoc(t, "docs/performance.md")
	_, section, ok := strings.Cut(perf, "\n## In short\n")
	if !ok {
		t.Fatal(`docs/performance.md has no "## In short" section`)
	}
	section, rest, _ := strings.Cut(section, "\n## ")
	figures := map[string]string{}
	for _, m := range summaryRow.FindAllStringSubmatch(section, -1) {
		figures[m[1]] = m[2]
		// The figure is the measurement's, as precise as a README quotes it.
		measured := figure.FindAllString(m[3], -1)
		_, decimals, _ := strings.Cut(m[2], ".")
		if !slices.ContainsFunc(measured, func(f string) bool {
			v, err := strconv.ParseFloat(f, 64)
			return err == nil && strconv.FormatFloat(v, 'f', len(decimals), 64) == m[2] && strings.Contains(rest, f)
		}) {
			t.Errorf("docs/performance.md's summary: %s %s is not what its source says it measured (%s), in the sections below", m[1], m[2], strings.TrimSpace(m[3]))
		}
	}
	if len(figures) < 3 {
		t.Fatalf("docs/performance.md's summary has %d figures", len(figures))
	}
	return figures, rest
}

// TestREADMEFiguresArePerformanceFigures: every figure a README quotes next
// to a link to docs/performance.md is a figure of that file's summary,
// written as `<value> <measure>` with the summary's value and words, so
// that a README cannot say "including events" of a figure measured
// without them, nor keep a figure the benchmarks no longer give.
func TestREADMEFiguresArePerformanceFigures(t *testing.T) {
	figures, _ := performanceSummary(t)
	quoted := 0
	for _, doc := range docs(t) {
		if filepath.Base(doc) != "README.md" {
			continue
		}
		// A paragraph or a table cell that links to performance.md.
		for _, part := range regexp.MustCompile(`\n\n|\|`).Split(readDoc(t, doc), -1) {
			if !strings.Contains(part, "performance.md") {
				continue
			}
			text := regexp.MustCompile(`\]\([^)]*\)`).ReplaceAllString(strings.Join(strings.Fields(part), " "), "]")
			for _, loc := range figure.FindAllStringIndex(text, -1) {
				value, after := text[loc[0]:loc[1]], text[loc[1]:]
				quoted++
				var measure string
				for m := range figures {
					if strings.HasPrefix(after, " "+m) && len(m) > len(measure) {
						measure = m
					}
				}
				switch {
				case measure == "":
					t.Errorf("%s: %q quotes a figure that is no measure of docs/performance.md's summary", doc, value+after[:min(len(after), 60)])
				case figures[measure] != value:
					t.Errorf("%s: %s %s, but docs/performance.md says %s", doc, value, measure, figures[measure])
				}
			}
		}
	}
	if quoted == 0 {
		t.Fatal("no README quotes docs/performance.md: the search is broken, or this test is no longer needed")
	}
}

var (
	countedIntro = regexp.MustCompile(`(?mi)^.*\b(two|three|four|five|six|seven|eight|nine|ten)(?: [a-z-]+){1,3}:\n`)
	listItem     = regexp.MustCompile(`^( *)(?:[-*]|[0-9]+\.) `)
	numbers      = map[string]int{"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
)

// TestDocsCountTheirLists: a sentence that announces a number of things in
// its last words ("Three rules matter:", "records two more things:") and is
// followed by a list has that many items.
func TestDocsCountTheirLists(t *testing.T) {
	counted := 0
	for _, doc := range docs(t) {
		text := readDoc(t, doc)
		for _, loc := range countedIntro.FindAllStringSubmatchIndex(text, -1) {
			want := numbers[strings.ToLower(text[loc[2]:loc[3]])]
			lines := strings.Split(text[loc[1]:], "\n")
			for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
				lines = lines[1:]
			}
			first := listItem.FindStringSubmatch(lines[0])
			if first == nil {
				continue // prose, a table or a code block follows
			}
			indent, items := first[1], 0
			for _, line := range lines {
				if m := listItem.FindStringSubmatch(line); m != nil && m[1] == indent {
					items++
					continue
				}
				if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, indent+" ") {
					break
				}
			}
			counted++
			if items != want {
				line := strings.Count(text[:loc[0]], "\n") + 1
				t.Errorf("%s:%d: %q announces %d, and %d items follow", doc, line, strings.TrimSpace(text[loc[0]:loc[1]]), want, items)
			}
		}
	}
	if counted < 3 {
		t.Fatalf("checked %d counted lists: the search is broken", counted)
	}
}

// TestArchitectureNamesCachedecodeFunctions: docs/architecture.md's picture
// of lib's subsystems names every function of lib/internal/cachedecode that
// lib/controller calls.
func TestArchitectureNamesCachedecodeFunctions(t *testing.T) {
	var funcs []string
	for _, f := range parseDir(t, "lib/internal/cachedecode") {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				funcs = append(funcs, fd.Name.Name)
			}
		}
	}
	var called []string
	for _, f := range parseDir(t, "lib/controller") {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "cachedecode" && slices.Contains(funcs, sel.Sel.Name) && !slices.Contains(called, sel.Sel.Name) {
					called = append(called, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if len(called) < 3 {
		t.Fatalf("lib/controller calls %v of cachedecode: the search is broken", called)
	}
	arch := readDoc(t, "docs/architecture.md")
	_, entry, ok := strings.Cut(arch, "└──► lib/internal/cachedecode")
	if !ok {
		t.Fatal("docs/architecture.md's picture has no lib/internal/cachedecode entry")
	}
	entry, _, _ = strings.Cut(entry, "```")
	for _, name := range called {
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(entry) {
			t.Errorf("docs/architecture.md's entry of lib/internal/cachedecode does not name %s, which lib/controller calls", name)
		}
	}
}
