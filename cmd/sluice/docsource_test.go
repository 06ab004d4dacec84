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

// codeMetrics returns every metric the module's code defines through
// client_golang, with its label names: the Name (with Namespace and
// Subsystem) of every prometheus.*Opts literal, which must be the first
// argument of a prometheus.New* constructor (the labels of a New*Vec are
// its second argument), and the first argument of every prometheus.NewDesc
// call (labels: its third).
func codeMetrics(t *testing.T) map[string][]string {
	metrics := map[string][]string{}
	add := func(sf sourceFile, at ast.Node, name string, labels []string) {
		if prev, dup := metrics[name]; dup && !slices.Equal(prev, labels) {
			t.Errorf("%s: metric %s defined again with other labels %v (first %v)", sf.fset.Position(at.Pos()), name, labels, prev)
		}
		metrics[name] = labels
	}
	for _, sf := range moduleSources(t, ".") {
		prom := importName(sf.file, prometheusImport)
		if prom == "" {
			continue
		}
		constructed := map[*ast.CompositeLit]bool{}
		ast.Inspect(sf.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || !isIdent(sel.X, prom) || len(n.Args) == 0 {
					return true
				}
				if sel.Sel.Name == "NewDesc" {
					name, ok := stringValue(n.Args[0], prom)
					labels, lok := labelNames(n.Args, 2)
					if !ok || !lok {
						t.Errorf("%s: cannot read the name or labels of this NewDesc call: use literals", sf.fset.Position(n.Pos()))
						return true
					}
					add(sf, n, name, labels)
					return true
				}
				lit, ok := n.Args[0].(*ast.CompositeLit)
				if !ok || !isMetricOpts(lit, prom) || !strings.HasPrefix(sel.Sel.Name, "New") {
					return true
				}
				constructed[lit] = true
				name, ok := optsName(lit)
				labels, lok := []string(nil), true
				if strings.HasSuffix(sel.Sel.Name, "Vec") {
					labels, lok = labelNames(n.Args, 1)
				}
				if !ok || !lok {
					t.Errorf("%s: cannot read the name or labels of this %s call: use literals", sf.fset.Position(n.Pos()), sel.Sel.Name)
					return true
				}
				add(sf, n, name, labels)
			case *ast.CompositeLit:
				if isMetricOpts(n, prom) && !constructed[n] {
					t.Errorf("%s: metric options outside a prometheus.New* call: pass the literal to the constructor so its name and labels can be read", sf.fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	for name, labels := range metrics {
		for _, prefix := range perClusterMetrics {
			if strings.HasPrefix(name, prefix) {
				metrics[name] = append([]string{"cluster"}, labels...)
			}
		}
	}
	return metrics
}

// perClusterMetrics are the prefixes of the metrics registered once per
// cluster with the label cluster added by the registry they go to
// (controller/daemon's clusterMetrics), which the source of their
// definitions does not show.
var perClusterMetrics = []string{"sluice_workload_", "sluice_binder_", "sluice_scheduler_"}

func codeMetricNames(t *testing.T) []string {
	var names []string
	for name := range codeMetrics(t) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// labelNames reads args[i] as a []string literal of label names (nil is
// no labels); a missing argument is no labels.
func labelNames(args []ast.Expr, i int) ([]string, bool) {
	if i >= len(args) || isIdent(args[i], "nil") {
		return nil, true
	}
	lit, ok := args[i].(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	var out []string
	for _, e := range lit.Elts {
		s, ok := stringValue(e, "")
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, true
}

func isMetricOpts(lit *ast.CompositeLit, prom string) bool {
	sel, ok := lit.Type.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, prom) && metricOpts[sel.Sel.Name]
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
