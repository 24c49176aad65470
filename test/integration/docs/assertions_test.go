// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const controllerPath = "github.com/kubeprov/external-storage/lib/controller"

// provisionerPackages are the packages that hold the provisioners, by the
// directory they are loaded from: the five of the workspace, and the ports,
// which are modules of their own built without it (GOWORK=off).
var provisionerPackages = map[string][]string{
	".": {
		"github.com/kubeprov/external-storage/csi/pkg/...",
		"github.com/kubeprov/external-storage/cinder/pkg/...",
		"github.com/kubeprov/external-storage/hostpath/pkg/...",
		"github.com/kubeprov/external-storage/flex/pkg/...",
		"github.com/kubeprov/external-storage/nfs/pkg/...",
		"github.com/kubeprov/external-storage/test/examples/...",
	},
	"test/ports/localpath-style": {"./..."},
	"test/ports/subdir-style":    {"./..."},
}

// loadTyped loads patterns, and lib/controller beside them so that their
// types are the same objects, from dir of the repository.
func loadTyped(t *testing.T, dir string, patterns []string) (*types.Package, []*packages.Package) {
	t.Helper()
	env := os.Environ()
	if dir != "." {
		env = append(env, "GOWORK=off")
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedImports,
		Dir:  filepath.Join(root, dir),
		Env:  env,
	}
	pkgs, err := packages.Load(cfg, append([]string{controllerPath}, patterns...)...)
	if err != nil {
		t.Fatalf("loading %v in %s: %v", patterns, dir, err)
	}
	var controller *types.Package
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		if p.PkgPath == controllerPath {
			controller = p.Types
		}
	}
	if controller == nil || len(pkgs) < 2 {
		t.Fatalf("loading %v in %s: found %d packages and no %s", patterns, dir, len(pkgs), controllerPath)
	}
	return controller, pkgs
}

// assertedOn returns, for each named type, the interfaces of lib/controller
// its package asserts at compile time (`var _ controller.X = (*T)(nil)`).
func assertedOn(p *packages.Package) map[*types.TypeName][]string {
	asserted := map[*types.TypeName][]string{}
	for _, f := range p.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || spec.Type == nil || len(spec.Values) != len(spec.Names) {
				return true
			}
			iface, ok := p.TypesInfo.TypeOf(spec.Type).(*types.Named)
			if !ok || iface.Obj().Pkg() == nil || iface.Obj().Pkg().Path() != controllerPath {
				return true
			}
			for i, name := range spec.Names {
				typ := p.TypesInfo.TypeOf(spec.Values[i])
				if ptr, ok := typ.(*types.Pointer); ok {
					typ = ptr.Elem()
				}
				if named, ok := typ.(*types.Named); ok && name.Name == "_" {
					asserted[named.Obj()] = append(asserted[named.Obj()], iface.Obj().Name())
				}
			}
			return true
		})
	}
	return asserted
}

// checkOptionalInterfaces reports, for every named type of pkgs: a method
// named as a method of an optional interface whose signature differs, which
// silently turns the feature off since the controller finds it by type
// assertion; and, for a Provisioner, each optional interface it implements
// without asserting it at compile time next to the type. (A slip in
// Provisioner's own methods fails to compile where the provisioner is
// passed to NewProvisionController.)
func checkOptionalInterfaces(controller *types.Package, optional []string, pkgs []*packages.Package) []string {
	var problems []string
	provisioner := controller.Scope().Lookup("Provisioner").Type().Underlying().(*types.Interface)
	for _, p := range pkgs {
		if p.Types == nil || p.PkgPath == controllerPath {
			continue
		}
		asserted := assertedOn(p)
		for _, name := range p.Types.Scope().Names() {
			tn, ok := p.Types.Scope().Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() || types.IsInterface(tn.Type()) {
				continue
			}
			ptr := types.NewPointer(tn.Type())
			methods := types.NewMethodSet(ptr)
			isProvisioner := types.Implements(ptr, provisioner)
			for _, iname := range optional {
				iface := controller.Scope().Lookup(iname).Type().Underlying().(*types.Interface)
				for i := range iface.NumExplicitMethods() {
					want := iface.ExplicitMethod(i)
					sel := methods.Lookup(want.Pkg(), want.Name())
					if sel != nil && !types.Identical(sel.Type(), want.Type()) {
						problems = append(problems, p.PkgPath+"."+name+" has "+want.Name()+sel.Type().String()[len("func"):]+
							", not controller."+iname+"'s "+want.Name()+want.Type().String()[len("func"):]+": the controller will not find it")
					}
				}
				if isProvisioner && types.Implements(ptr, iface) && !covered(controller, asserted[tn], iface) {
					problems = append(problems, p.PkgPath+"."+name+" implements controller."+iname+" without `var _ controller."+iname+" = (*"+name+")(nil)` beside it")
				}
			}
		}
	}
	return problems
}

// TestOptionalInterfacesAssertedAndExact: each provisioner and each port
// asserts at compile time every optional interface it implements, and no
// type has a method named as an optional interface's with another
// signature: the controller finds optional interfaces by type assertion at
// run time, so a slip would switch a feature off without a word.
func TestOptionalInterfacesAssertedAndExact(t *testing.T) {
	optional, _ := optionalInterfaces(t)

	// The check finds a slip: testdata/slip's ShouldDelete takes no context.
	controller, pkgs := loadTyped(t, ".", []string{"./test/integration/docs/testdata/slip"})
	problems := checkOptionalInterfaces(controller, optional, pkgs)
	if len(problems) != 2 || !strings.Contains(strings.Join(problems, "\n"), "slipProvisioner has ShouldDelete(pv *k8s.io/api/core/v1.PersistentVolume) bool, not controller.DeletionGuard's") {
		t.Errorf("the check on testdata/slip found %q, want its ShouldDelete slip and its unasserted BlockProvisioner", problems)
	}

	for dir, patterns := range provisionerPackages {
		t.Run(dir, func(t *testing.T) {
			controller, pkgs := loadTyped(t, dir, patterns)
			for _, problem := range checkOptionalInterfaces(controller, optional, pkgs) {
				t.Error(problem)
			}
		})
	}
}

// covered tells whether an assertion of one of the named interfaces of
// controller asserts iface too (RetryingQualifier's asserts Qualifier).
func covered(controller *types.Package, asserted []string, iface *types.Interface) bool {
	return slices.ContainsFunc(asserted, func(name string) bool {
		return types.Implements(controller.Scope().Lookup(name).Type(), iface)
	})
}
