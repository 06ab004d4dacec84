package rollout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoIO guards the machine's purity (DESIGN §2): its non-test files
// import no I/O, clock or concurrency package, and use time only for
// time.Duration.
func TestNoIO(t *testing.T) {
	allowed := map[string]bool{
		"errors": true, "fmt": true, "reflect": true, "strings": true, "time": true,
		"github.com/sluice-dev/sluice/api": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !allowed[path] {
					t.Errorf("imports %s", path)
				}
			}
		})
	}
	// Of time, only types and constants: no clock, no timer.
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && sel.Sel.Name != "Duration" {
				t.Errorf("%s: uses time.%s", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
