// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package pathpattern

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultTemplateMaxBytes bounds what a Go-template pattern may write when
// Rules.MaxBytes sets no bound: printf can pad to a megabyte.
const DefaultTemplateMaxBytes = 4096

// templateFields is how messages name what a Go-template pattern may read.
const templateFields = ".PVName, .PVC.Name, .PVC.Namespace, .PVC.UID, .PVC.Labels.KEY, .PVC.Annotations.KEY or index .PVC.Labels \"KEY\""

// IsTemplate reports whether pattern is in rancher/local-path-provisioner's
// Go-template spelling ({{ .PVC.Namespace }}) rather than ${.PVC.namespace}.
func IsTemplate(pattern string) bool { return strings.Contains(pattern, "{{") }

// templateData is what local-path hands its pathPattern template, less the
// claim fields that change during the claim's life or that a controller
// restart does not keep (controller.ClaimMetadataReader): a pattern read
// twice must name the same directory twice.
type templateData struct {
	PVName string
	PVC    templateClaim
}

type templateClaim struct {
	Name        string
	Namespace   string
	UID         types.UID
	Labels      map[string]string
	Annotations map[string]string
}

// TemplateKeys returns the claim labels and annotations a Go-template
// pattern reads (.PVC.Labels.KEY, index .PVC.Labels "KEY", and the same for
// .PVC.Annotations, also through $), for controller.ClaimMetadataReader. A
// pattern whose reads cannot be listed is an error wrapping ErrPathPattern:
// one that reads a whole map, the whole claim or a field of a variable,
// another field, or uses range, with or template, which change what "." is.
func TemplateKeys(pattern string) (labels, annotations []string, err error) {
	tmpl, err := template.New(Key).Parse(pattern)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, err)
	}
	w := keyWalker{}
	w.node(tmpl.Root)
	if w.err != nil {
		return nil, nil, fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, w.err)
	}
	return w.labels, w.annotations, nil
}

type keyWalker struct {
	labels, annotations []string
	err                 error
}

func (w *keyWalker) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

func (w *keyWalker) node(n parse.Node) {
	switch n := n.(type) {
	case nil, *parse.TextNode, *parse.CommentNode:
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			w.node(c)
		}
	case *parse.ActionNode:
		w.pipe(n.Pipe)
	case *parse.IfNode:
		w.pipe(n.Pipe)
		w.node(n.List)
		w.node(n.ElseList)
	default:
		w.fail("%s is not supported: read the fields from the top (%s)", n, templateFields)
	}
}

func (w *keyWalker) pipe(p *parse.PipeNode) {
	for _, cmd := range p.Cmds {
		if key, ok := indexedKey(cmd); ok {
			w.add(key.field, key.key)
			continue
		}
		for _, arg := range cmd.Args {
			w.arg(arg)
		}
	}
}

func (w *keyWalker) arg(arg parse.Node) {
	switch a := arg.(type) {
	case *parse.FieldNode:
		w.field(a.Ident)
	case *parse.VariableNode:
		switch {
		case a.Ident[0] == "$":
			w.field(a.Ident[1:])
		case len(a.Ident) > 1:
			w.fail("%s: fields of variables are not supported; read %s", a, templateFields)
		}
	case *parse.PipeNode:
		w.pipe(a)
	case *parse.IdentifierNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
	default:
		w.fail("%s reads more than named fields; read %s", a, templateFields)
	}
}

// identityFields are the fields of the claim and PV a template may read
// whole.
var identityFields = map[string]bool{".PVName": true, ".PVC.Name": true, ".PVC.Namespace": true, ".PVC.UID": true}

// isClaimMap says whether ids start with PVC.Labels or PVC.Annotations.
func isClaimMap(ids []string) bool {
	return len(ids) >= 2 && ids[0] == "PVC" && (ids[1] == "Labels" || ids[1] == "Annotations")
}

// field checks a field path from the template's root.
func (w *keyWalker) field(ids []string) {
	path := "." + strings.Join(ids, ".")
	switch {
	case identityFields[path]:
	case len(ids) == 3 && isClaimMap(ids):
		w.add(ids[1], ids[2])
	case len(ids) == 2 && isClaimMap(ids):
		w.fail("%s reads all of the claim's %s: name one key (%s.KEY, or index %s \"KEY\")", path, strings.ToLower(ids[1]), path, path)
	default:
		if len(ids) == 0 {
			path = "$"
		}
		w.fail("%s cannot be read; read %s", path, templateFields)
	}
}

func (w *keyWalker) add(field, key string) {
	if field == "Labels" {
		w.labels = append(w.labels, key)
	} else {
		w.annotations = append(w.annotations, key)
	}
}

type mapKey struct{ field, key string }

// indexedKey recognizes index .PVC.Labels "KEY" (or $.PVC.Annotations).
func indexedKey(cmd *parse.CommandNode) (mapKey, bool) {
	if len(cmd.Args) != 3 {
		return mapKey{}, false
	}
	if fn, ok := cmd.Args[0].(*parse.IdentifierNode); !ok || fn.Ident != "index" {
		return mapKey{}, false
	}
	key, ok := cmd.Args[2].(*parse.StringNode)
	if !ok {
		return mapKey{}, false
	}
	var ids []string
	switch m := cmd.Args[1].(type) {
	case *parse.FieldNode:
		ids = m.Ident
	case *parse.VariableNode:
		if m.Ident[0] != "$" {
			return mapKey{}, false
		}
		ids = m.Ident[1:]
	}
	if len(ids) != 2 || !isClaimMap(ids) {
		return mapKey{}, false
	}
	return mapKey{field: ids[1], key: key.Text}, true
}

// ExpandTemplate is Expand for local-path's Go-template spelling: the
// directory pattern names for the claim and PV, from .PVName and the
// claim's .PVC.Name, .PVC.Namespace, .PVC.UID, .PVC.Labels and
// .PVC.Annotations. A label or annotation read as a field must exist; one
// read with index may be missing and is then empty. A trailing slash is
// dropped (local-path's examples end with one). The result obeys the
// rules of Expand's.
func ExpandTemplate(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string, r Rules) (string, error) {
	labels, annotations, err := TemplateKeys(pattern)
	if err != nil {
		return "", err
	}
	if err := r.checkClaimValues(pattern, pvc, labels, annotations); err != nil {
		return "", err
	}
	tmpl, err := template.New(Key).Option("missingkey=error").Parse(pattern)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, err)
	}
	limit := r.MaxBytes
	if limit <= 0 {
		limit = DefaultTemplateMaxBytes
	}
	out := &boundedBuilder{max: limit}
	data := templateData{PVName: pvName, PVC: templateClaim{
		Name: pvc.Name, Namespace: pvc.Namespace, UID: pvc.UID, Labels: pvc.Labels, Annotations: pvc.Annotations,
	}}
	if err := tmpl.Execute(out, data); err != nil {
		if errors.Is(err, errTooLong) {
			return "", fmt.Errorf("%w %q: it expands to a path of more than %d bytes", ErrPathPattern, pattern, limit)
		}
		return "", fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, err)
	}
	return checkExpanded(pattern, strings.TrimRight(out.String(), "/"), r)
}

// checkClaimValues applies r.Value to the claim labels and annotations a
// template reads, so that a refusal names the one at fault; the names and
// the UID are DNS names, and the result is checked whole after.
func (r Rules) checkClaimValues(pattern string, pvc *corev1.PersistentVolumeClaim, labels, annotations []string) error {
	for _, k := range labels {
		if err := r.checkValue(pattern, variableSource(".PVC.labels."+k), pvc.Labels[k]); err != nil {
			return err
		}
	}
	for _, k := range annotations {
		if err := r.checkValue(pattern, variableSource(".PVC.annotations."+k), pvc.Annotations[k]); err != nil {
			return err
		}
	}
	return nil
}

var errTooLong = errors.New("output too long")

// boundedBuilder refuses to grow past max bytes.
type boundedBuilder struct {
	strings.Builder
	max int
}

func (b *boundedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errTooLong
	}
	return b.Builder.Write(p)
}
