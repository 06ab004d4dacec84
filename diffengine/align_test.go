package diffengine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// steps builds a canonical step list from short names: w10 is setWeight 10,
// p30 a 30s pause, p a pause until promoted, aX an analysis of template X.
func stepList(spec string) []any {
	var out []any
	for _, f := range strings.Fields(spec) {
		switch {
		case f == "p":
			out = append(out, map[string]any{"pause": map[string]any{}})
		case f[0] == 'p':
			out = append(out, map[string]any{"pause": map[string]any{"duration": f[1:] + "s"}})
		case f[0] == 'w':
			var w float64
			fmt.Sscan(f[1:], &w)
			out = append(out, map[string]any{"setWeight": w})
		case f[0] == 'a':
			out = append(out, map[string]any{"analysis": map[string]any{"templates": []any{map[string]any{"templateName": f[1:]}}}})
		}
	}
	return out
}

func TestAlign(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		ops      string // op kinds in script order: = ~ - + > (move in)
		// landing[i] is where old step i continues in the new list.
		landing []int
	}{
		{"same", "w10 p30 w50", "w10 p30 w50", "===", []int{0, 1, 2, 3}},
		{"insert middle", "w10 p30 w50 p", "w10 p30 w25 p60 w50 p", "==++==", []int{0, 1, 4, 5, 6}},
		{"insert front", "w10 p", "w5 w10 p", "+==", []int{1, 2, 3}},
		{"remove middle", "w10 p30 w50 p", "w10 w50 p", "=-==", []int{0, 1, 1, 2, 3}},
		{"modify weight", "w10 p30 w50 p", "w10 p30 w80 p", "==~=", []int{0, 1, 2, 3, 4}},
		{"different kind replaces", "w10 p30 w50", "w10 aX w50", "=-+=", []int{0, 1, 2, 3}},
		{"two replaced by two of other kinds", "w10 p30 p60 w50", "w10 aX aY w50", "=--++=", []int{0, 1, 1, 3, 4}},
		{"move analysis to end", "w10 aX w50 p", "w10 w50 p aX", "=-==>", []int{0, 1, 1, 2, 4}},
		{"all removed", "w10 p30", "", "--", []int{0, 0, 0}},
		{"from nothing", "", "w10 p", "++", []int{2}},
		{"current step replaced then more", "w10 p30 p60 w50", "w10 aX w50", "=--+=", []int{0, 1, 1, 2, 3}},
	}
	symbol := map[opKind]byte{opEqual: '=', opModify: '~', opDelete: '-', opInsert: '+', opMoveIn: '>', opMoveOut: '-'}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			al := align(stepList(tt.old), stepList(tt.new))
			var got []byte
			for _, o := range al.ops {
				got = append(got, symbol[o.kind])
			}
			if string(got) != tt.ops {
				t.Errorf("ops %q, want %q", got, tt.ops)
			}
			for i, want := range tt.landing {
				if l := al.landing(i); l != want {
					t.Errorf("landing(%d) = %d, want %d", i, l, want)
				}
			}
		})
	}
}

func TestLCSLongListsFallBack(t *testing.T) {
	// Lists past the LCS table bound still align (by common prefix and
	// suffix, the middle as edits) instead of allocating gigabytes.
	a := make([]string, 3000)
	b := make([]string, 3000)
	for i := range a {
		a[i], b[i] = fmt.Sprint(i), fmt.Sprint(i+1)
	}
	if m := lcs(a, b); len(m) != 0 {
		t.Fatalf("got %d matches, want none past the bound", len(m))
	}
}

func TestFieldPathString(t *testing.T) {
	p := fieldPath(nil).field("spec").field("strategy").field("canary").field("steps").index(3).field("setWeight")
	if got := p.String(); got != "spec.strategy.canary.steps[3].setWeight" {
		t.Errorf("got %s", got)
	}
	p = fieldPath(nil).field("plugins").field(api.XDSPluginName).field("endpoints").field("shop/a:v1").index(0)
	if got := p.String(); got != `plugins["sluice.io/xds"].endpoints["shop/a:v1"][0]` {
		t.Errorf("got %s", got)
	}
	p = fieldPath(nil).field("containers").named("app").field("image")
	if got := p.String(); got != "containers[app].image" {
		t.Errorf("got %s", got)
	}
}
