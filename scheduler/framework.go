package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// framework holds the enabled plugins per extension point, in profile
// order.
type framework struct {
	g          *Graph
	nextKey    StateKey
	names      []string
	preFilter  []PreFilterPlugin
	filter     []FilterPlugin
	postFilter []PostFilterPlugin
	preScore   []PreScorePlugin
	score      []scorePlugin
	reserve    []ReservePlugin
	bind       []BindPlugin
}

type scorePlugin struct {
	p      ScorePlugin
	batch  BatchScorePlugin // nil when p scores one node at a time
	ext    ScoreExtensions
	weight int64
	// preScore is the index in framework.preScore of the same plugin, or
	// -1; a Skip there skips this score plugin.
	preScore int
}

func (f *framework) Graph() *Graph { return f.g }

func (f *framework) StateKey() StateKey {
	k := f.nextKey
	f.nextKey++
	return k
}

// newFramework builds the plugins of cfg from reg.
func newFramework(g *Graph, reg Registry, cfg []PluginConfig) (*framework, error) {
	f := &framework{g: g}
	seen := map[string]bool{}
	for _, pc := range cfg {
		if seen[pc.Name] {
			return nil, fmt.Errorf("plugin %s enabled twice", pc.Name)
		}
		seen[pc.Name] = true
		factory, ok := reg[pc.Name]
		if !ok {
			return nil, fmt.Errorf("plugin %s: not in registry", pc.Name)
		}
		p, err := factory(pc.Args, f)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", pc.Name, err)
		}
		if p.Name() != pc.Name {
			return nil, fmt.Errorf("plugin %s: factory built %s", pc.Name, p.Name())
		}
		f.names = append(f.names, pc.Name)
		if x, ok := p.(PreFilterPlugin); ok {
			f.preFilter = append(f.preFilter, x)
		}
		if x, ok := p.(FilterPlugin); ok {
			f.filter = append(f.filter, x)
		}
		if x, ok := p.(PostFilterPlugin); ok {
			f.postFilter = append(f.postFilter, x)
		}
		pre := -1
		if x, ok := p.(PreScorePlugin); ok {
			pre = len(f.preScore)
			f.preScore = append(f.preScore, x)
		}
		if x, ok := p.(ScorePlugin); ok {
			w := pc.Weight
			if w == 0 {
				w = 1
			}
			if w < 0 {
				return nil, fmt.Errorf("plugin %s: negative weight %d", pc.Name, w)
			}
			b, _ := p.(BatchScorePlugin)
			f.score = append(f.score, scorePlugin{p: x, batch: b, ext: x.ScoreExtensions(), weight: w, preScore: pre})
		}
		if x, ok := p.(ReservePlugin); ok {
			f.reserve = append(f.reserve, x)
		}
		if x, ok := p.(BindPlugin); ok {
			f.bind = append(f.bind, x)
		}
	}
	return f, nil
}

// runFilters returns the first rejection of node n by filters, or nil.
func runFilters(ctx context.Context, filters []FilterPlugin, state *CycleState, pod *PodInfo, n *NodeState) *Status {
	for _, p := range filters {
		if st := p.Filter(ctx, state, pod, n); st != nil {
			if st.plugin == "" {
				st = st.WithPlugin(p.Name())
			}
			return st
		}
	}
	return nil
}

// ReasonCount is how many nodes one plugin rejected for one reason.
type ReasonCount struct {
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Diagnosis says why no node fitted: how many nodes were looked at and the
// rejections grouped by reason.
type Diagnosis struct {
	Nodes   int           `json:"nodes"`
	Reasons []ReasonCount `json:"reasons"`
}

// String reads like kube-scheduler's event: "0/60 nodes are available:
// 40 Insufficient cpu, 20 node(s) had untolerated taint."
func (d *Diagnosis) String() string {
	var b strings.Builder
	b.WriteString("0/")
	b.WriteString(strconv.Itoa(d.Nodes))
	b.WriteString(" nodes are available")
	for i, r := range d.Reasons {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r.Count))
		b.WriteString(" ")
		b.WriteString(r.Reason)
	}
	b.WriteString(".")
	return b.String()
}

// tally counts rejections by status during one filter pass without
// allocating once grown: few distinct statuses exist, so a slice with a
// linear search beats a map.
type tally struct {
	st []*Status
	n  []int
}

func (t *tally) reset() { t.st, t.n = t.st[:0], t.n[:0] }

func (t *tally) add(st *Status) { t.addN(st, 1) }

func (t *tally) addN(st *Status, n int) {
	for i, s := range t.st {
		if s == st {
			t.n[i] += n
			return
		}
	}
	t.st = append(t.st, st)
	t.n = append(t.n, n)
}

// diagnosis merges tallies into a Diagnosis sorted by count, then reason,
// so the text is the same whichever worker saw which node.
func diagnosis(nodes int, ts []tally) *Diagnosis {
	d := &Diagnosis{Nodes: nodes}
	for _, t := range ts {
		for i, st := range t.st {
			j := slices.IndexFunc(d.Reasons, func(r ReasonCount) bool { return r.Plugin == st.plugin && r.Reason == st.reason })
			if j < 0 {
				d.Reasons = append(d.Reasons, ReasonCount{Plugin: st.plugin, Reason: st.reason})
				j = len(d.Reasons) - 1
			}
			d.Reasons[j].Count += t.n[i]
		}
	}
	slices.SortFunc(d.Reasons, func(a, b ReasonCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return d
}
