package diffengine

import (
	"cmp"
	"slices"

	"github.com/sluice-dev/sluice/api"
)

// DiffSets compares two loads of a strategy tree. It returns one Change for
// every rollout valid in either set (Unchanged ones included), sorted by
// key. live gives each rollout's live position; nil means none in flight.
//
// Analysis templates: a rollout whose referenced templates (steps and
// background analysis, resolved in each set as the loader does) changed
// gets those template changes appended, with paths prefixed by
// analysisTemplates[namespace/name] or clusterAnalysisTemplates[name], and
// is at least a StrategyEdit. A metric whose failureLimit was loosened makes
// every rollout that references its template Risky.
//
// A rollout valid in old but rejected in new, or missing from new because
// its file has a syntax error (new.Unreadable), is left out: it is not gone,
// the controller keeps its last good version (new.Diagnostics says why). A
// rollout rejected in old and valid in new comes out as Added; a controller
// that kept an older good version should call DiffRollouts with that
// version instead.
func DiffSets(old, new *api.Set, live func(api.Key) Live) []Change {
	old, new = orEmpty(old), orEmpty(new)
	rejected := make(map[api.Key]bool, len(new.Rejected))
	for _, r := range new.Rejected {
		rejected[r.Key] = true
	}
	unreadable := make(map[string]bool, len(new.Unreadable))
	for _, f := range new.Unreadable {
		unreadable[f] = true
	}
	td := templateDiffs{old: old, new: new, cache: map[tplID]*templateDiff{}}
	var out []Change
	mergeByKey(old.Rollouts, new.Rollouts, func(o, n *api.Rollout) {
		if n == nil && (rejected[o.Key] || unreadable[o.File]) {
			return
		}
		var lv Live
		if live != nil {
			lv = live(keyOf(o, n))
		}
		c := DiffRollouts(o, n, lv)
		if o != nil && n != nil {
			td.apply(&c)
		}
		out = append(out, c)
	})
	return out
}

// DiffSetTemplates compares the analysis templates of two sets: one entry
// per template in either set, sorted by scope and key.
func DiffSetTemplates(old, new *api.Set) []TemplateChange {
	old, new = orEmpty(old), orEmpty(new)
	byID := func(ts []*api.AnalysisTemplate) map[tplID]*api.AnalysisTemplate {
		m := make(map[tplID]*api.AnalysisTemplate, len(ts))
		for _, t := range ts {
			m[idOf(t)] = t
		}
		return m
	}
	om, nm := byID(old.Templates), byID(new.Templates)
	unreadable := make(map[string]bool, len(new.Unreadable))
	for _, f := range new.Unreadable {
		unreadable[f] = true
	}
	ids := make([]tplID, 0, len(om)+len(nm))
	for id := range om {
		ids = append(ids, id)
	}
	for id := range nm {
		if om[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, compareIDs)
	out := make([]TemplateChange, 0, len(ids))
	for _, id := range ids {
		o, n := om[id], nm[id]
		if n == nil && unreadable[o.File] {
			continue // not gone: its file does not parse
		}
		c := TemplateChange{Template: id.key, ClusterScoped: id.cluster, Changes: DiffTemplates(o, n)}
		switch {
		case o == nil:
			c.Class = Added
		case n == nil:
			c.Class = Removed
		case len(c.Changes) > 0:
			c.Class = StrategyEdit
		default:
			c.Class = Unchanged
		}
		out = append(out, c)
	}
	return out
}

func orEmpty(s *api.Set) *api.Set {
	if s == nil {
		return &api.Set{}
	}
	return s
}

func keyOf(o, n *api.Rollout) api.Key {
	if n != nil {
		return n.Key
	}
	return o.Key
}

func compareKeys(a, b api.Key) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// mergeByKey calls f for every key in a or b, in key order, with nil for
// the side that lacks it. It sorts copies, so it does not rely on the
// loader's order.
func mergeByKey(a, b []*api.Rollout, f func(o, n *api.Rollout)) {
	byKey := func(x, y *api.Rollout) int { return compareKeys(x.Key, y.Key) }
	a, b = slices.SortedFunc(slices.Values(a), byKey), slices.SortedFunc(slices.Values(b), byKey)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && compareKeys(a[i].Key, b[j].Key) < 0):
			f(a[i], nil)
			i++
		case i == len(a) || compareKeys(a[i].Key, b[j].Key) > 0:
			f(nil, b[j])
			j++
		default:
			f(a[i], b[j])
			i++
			j++
		}
	}
}

// tplID identifies a template: cluster-scoped ones have no namespace.
type tplID struct {
	cluster bool
	key     api.Key
}

func idOf(t *api.AnalysisTemplate) tplID {
	if t.ClusterScoped {
		return tplID{cluster: true, key: api.Key{Name: t.Name}}
	}
	return tplID{key: t.Key}
}

func compareIDs(a, b tplID) int {
	if a.cluster != b.cluster {
		if a.cluster {
			return 1
		}
		return -1
	}
	return compareKeys(a.key, b.key)
}

type templateDiff struct {
	changes  []FieldChange
	loosened []string
}

// templateDiffs diffs each template once, however many rollouts use it.
type templateDiffs struct {
	old, new *api.Set
	cache    map[tplID]*templateDiff
}

func (td templateDiffs) apply(c *Change) {
	seen := map[tplID]bool{}
	for _, ref := range templateRefs(c.New) {
		nt := td.new.Template(c.New.Namespace, ref)
		ot := td.old.Template(c.New.Namespace, ref)
		if nt == nil || ot == nil {
			continue
		}
		id := idOf(nt)
		if seen[id] {
			continue
		}
		seen[id] = true
		d := td.diff(id, ot, nt)
		if len(d.changes) == 0 {
			continue
		}
		prefix := fieldPath{{name: "analysisTemplates"}, {kind: segNamed, name: id.key.String()}}
		if id.cluster {
			prefix = fieldPath{{name: "clusterAnalysisTemplates"}, {kind: segNamed, name: id.key.Name}}
		}
		p := prefix.String()
		for _, fc := range d.changes {
			fc.Path = p + "." + fc.Path
			c.Changes = append(c.Changes, fc)
		}
		switch c.Class {
		case Unchanged, Cosmetic, EndpointsOnly:
			c.Class = StrategyEdit
		}
		c.Reasons = append(c.Reasons, d.loosened...)
	}
	c.Risky = len(c.Reasons) > 0
}

func (td templateDiffs) diff(id tplID, ot, nt *api.AnalysisTemplate) *templateDiff {
	if d, ok := td.cache[id]; ok {
		return d
	}
	d := &templateDiff{changes: DiffTemplates(ot, nt)}
	if len(d.changes) > 0 {
		d.loosened = loosenedFailureLimits(ot, nt)
	}
	td.cache[id] = d
	return d
}

// templateRefs lists the templates a rollout's steps and background
// analysis reference.
func templateRefs(r *api.Rollout) []api.TemplateRef {
	var refs []api.TemplateRef
	if r.Background != nil {
		refs = append(refs, r.Background.Templates...)
	}
	for _, s := range r.Steps {
		if s.Analysis != nil {
			refs = append(refs, s.Analysis.Templates...)
		}
	}
	return refs
}
