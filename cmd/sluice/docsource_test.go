package main

// Names the code defines, read from the module's Go source for the docs
// completeness test.
//
// Metric names come from the source, not from a registry: the daemon's
// registry cannot list what it holds (Gather shows a labelled metric only
// once it has a series, the rollout collector only once a rollout exists),
// and the scheduler's metrics are registered by the scheduler, not the
// daemon. The scan is strict instead: a prometheus *Opts literal or NewDesc
// call whose name is not a string constant fails the test, so a metric
// cannot slip past it.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the repository root, seen from cmd/sluice.
var moduleRoot = filepath.Join("..", "..")

const prometheusImport = "github.com/prometheus/client_golang/prometheus"

// sourceFile is one parsed non-test Go file of the module.
type sourceFile struct {
	path string
	fset *token.FileSet
	file *ast.File
}

// moduleSources parses every non-test Go file under dir (relative to the
// module root), skipping testdata and hidden directories.
func moduleSources(t *testing.T, dir string) []sourceFile {
	t.Helper()
	var out []sourceFile
	root := filepath.Join(moduleRoot, dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, sourceFile{path: p, fset: fset, file: f})
		return nil
	})
	if err != nil {
		t.Fatalf("read module source: %v", err)
	}
	return out
}

// codeMetricNames returns the name of every metric the module's code
// defines through client_golang: the Name (with Namespace and Subsystem)
// of every prometheus.*Opts literal and the first argument of every
// prometheus.NewDesc call.
func codeMetricNames(t *testing.T) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, sf := range moduleSources(t, ".") {
		prom := importName(sf.file, prometheusImport)
		if prom == "" {
			continue
		}
		ast.Inspect(sf.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, prom) && metricOpts[sel.Sel.Name] {
					if name, ok := optsName(n); ok {
						add(name)
					} else {
						t.Errorf("%s: cannot read the metric name of this %s literal: use string literals", sf.fset.Position(n.Pos()), sel.Sel.Name)
					}
				}
			case *ast.CallExpr:
				if isCall(n, prom, "NewDesc") && len(n.Args) > 0 {
					if name, ok := stringValue(n.Args[0], prom); ok {
						add(name)
					} else {
						t.Errorf("%s: cannot read the metric name of this NewDesc call: use a string literal", sf.fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
	}
	return names
}

// metricOpts are the client_golang option types that name a metric.
var metricOpts = map[string]bool{
	"Opts": true, "GaugeOpts": true, "CounterOpts": true, "UntypedOpts": true,
	"HistogramOpts": true, "SummaryOpts": true,
	"GaugeVecOpts": true, "CounterVecOpts": true, "HistogramVecOpts": true, "SummaryVecOpts": true,
}

// optsName is the full name of a prometheus.*Opts literal:
// namespace_subsystem_name, the empty parts left out (BuildFQName's rule).
func optsName(lit *ast.CompositeLit) (string, bool) {
	parts := map[string]string{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return "", false // positional fields: not something to guess at
		}
		key, _ := kv.Key.(*ast.Ident)
		if key == nil || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
			continue
		}
		v, ok := stringValue(kv.Value, "")
		if !ok {
			return "", false
		}
		parts[key.Name] = v
	}
	if parts["Name"] == "" {
		return "", false
	}
	return joinNonEmpty(parts["Namespace"], parts["Subsystem"], parts["Name"]), true
}

// stringValue reads a string literal, or prom.BuildFQName of literals.
func stringValue(e ast.Expr, prom string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.CallExpr:
		if prom == "" || !isCall(e, prom, "BuildFQName") || len(e.Args) != 3 {
			return "", false
		}
		var parts []string
		for _, a := range e.Args {
			s, ok := stringValue(a, "")
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return joinNonEmpty(parts...), true
	}
	return "", false
}

func joinNonEmpty(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "_")
}

// codeAlertEvents returns the alert event names: the constants of type
// alert.Event (controller/alert) and rollout.AlertEvent (controller/rollout).
func codeAlertEvents(t *testing.T) []string {
	var events []string
	for _, c := range []struct{ dir, typ string }{
		{filepath.Join("controller", "alert"), "Event"},
		{filepath.Join("controller", "rollout"), "AlertEvent"},
	} {
		for _, sf := range moduleSources(t, c.dir) {
			if filepath.Dir(sf.path) != filepath.Join(moduleRoot, c.dir) {
				continue // a sub-package
			}
			for _, decl := range sf.file.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					if !isIdent(vs.Type, c.typ) {
						continue
					}
					for _, v := range vs.Values {
						s, ok := stringValue(v, "")
						if !ok {
							t.Errorf("%s: cannot read this %s constant: use a string literal", sf.fset.Position(v.Pos()), c.typ)
							continue
						}
						if !slices.Contains(events, s) {
							events = append(events, s)
						}
					}
				}
			}
		}
	}
	return events
}

// importName is the name a file uses for an import path ("" if it does
// not import it).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != path {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return filepath.Base(path)
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isCall(c *ast.CallExpr, pkg, fn string) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, pkg) && sel.Sel.Name == fn
}
