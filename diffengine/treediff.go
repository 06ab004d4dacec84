package diffengine

import "slices"

// diffTree appends the differences between two canonical trees to out.
func diffTree(p fieldPath, a, b any, out *[]FieldChange) {
	switch ta := a.(type) {
	case map[string]any:
		if tb, ok := b.(map[string]any); ok {
			diffMaps(p, ta, tb, out)
			return
		}
	case []any:
		if tb, ok := b.([]any); ok {
			if key := keyField(ta, tb); key != "" {
				diffKeyed(p, key, ta, tb, out)
			} else {
				diffSequence(p, ta, tb, out)
			}
			return
		}
	}
	if !equal(a, b) {
		*out = append(*out, FieldChange{Path: p.String(), Kind: KindModified, Old: a, New: b})
	}
}

func diffMaps(p fieldPath, a, b map[string]any, out *[]FieldChange) {
	for _, k := range sortedKeys(a, b) {
		va, inA := a[k]
		vb, inB := b[k]
		switch {
		case !inB:
			*out = append(*out, FieldChange{Path: p.field(k).String(), Kind: KindRemoved, Old: va})
		case !inA:
			*out = append(*out, FieldChange{Path: p.field(k).String(), Kind: KindAdded, New: vb})
		default:
			diffTree(p.field(k), va, vb, out)
		}
	}
}

// diffSequence diffs an ordered list of unnamed elements (steps, container
// args, header matches) with an LCS edit script.
func diffSequence(p fieldPath, a, b []any, out *[]FieldChange) {
	if equal(a, b) {
		return
	}
	al := align(a, b)
	for _, o := range al.ops {
		switch o.kind {
		case opModify:
			diffTree(p.index(o.j), a[o.i], b[o.j], out)
		case opDelete:
			*out = append(*out, FieldChange{Path: p.index(o.i).String(), Kind: KindRemoved, Old: a[o.i]})
		case opInsert:
			*out = append(*out, FieldChange{Path: p.index(o.j).String(), Kind: KindAdded, New: b[o.j]})
		case opMoveIn:
			*out = append(*out, FieldChange{Path: p.index(o.j).String(), Kind: KindMoved, Old: o.i, New: o.j})
		}
	}
}

// keyFields are the fields that name list elements, most specific first.
var keyFields = [...]string{"name", "templateName", "metricName"}

// keyField returns the field that names every element of both lists
// uniquely, or "" when the lists are not named lists.
func keyField(a, b []any) string {
	for _, k := range keyFields {
		if uniqueKeys(a, k) && uniqueKeys(b, k) {
			return k
		}
	}
	return ""
}

func uniqueKeys(l []any, key string) bool {
	if len(l) == 0 {
		return false
	}
	seen := make(map[string]bool, len(l))
	for _, v := range l {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		s, ok := m[key].(string)
		if !ok || seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

// diffKeyed diffs a named list element by element. Order still matters
// for some named lists (managedRoutes are in precedence order, the first
// container carries the version), so elements whose relative order changed
// are reported as moved.
func diffKeyed(p fieldPath, key string, a, b []any, out *[]FieldChange) {
	name := func(v any) string { return v.(map[string]any)[key].(string) }
	posA := make(map[string]int, len(a))
	for i, v := range a {
		posA[name(v)] = i
	}
	posB := make(map[string]int, len(b))
	for j, v := range b {
		posB[name(v)] = j
	}
	// Common names in each order; the ones outside their LCS moved.
	var ca, cb []string
	for _, v := range a {
		if _, ok := posB[name(v)]; ok {
			ca = append(ca, name(v))
		}
	}
	for _, v := range b {
		if _, ok := posA[name(v)]; ok {
			cb = append(cb, name(v))
		}
	}
	stay := make(map[string]bool, len(cb))
	for _, m := range lcs(ca, cb) {
		stay[ca[m[0]]] = true
	}
	for j, v := range b {
		n := name(v)
		i, inA := posA[n]
		if !inA {
			*out = append(*out, FieldChange{Path: p.named(n).String(), Kind: KindAdded, New: v})
			continue
		}
		if !stay[n] {
			*out = append(*out, FieldChange{Path: p.named(n).String(), Kind: KindMoved, Old: i, New: j})
		}
		diffTree(p.named(n), a[i], v, out)
	}
	for _, v := range a {
		if _, inB := posB[name(v)]; !inB {
			*out = append(*out, FieldChange{Path: p.named(name(v)).String(), Kind: KindRemoved, Old: v})
		}
	}
}

// equal compares two canonical tree values.
func equal(a, b any) bool {
	switch ta := a.(type) {
	case map[string]any:
		tb, ok := b.(map[string]any)
		if !ok || len(ta) != len(tb) {
			return false
		}
		for k, va := range ta {
			vb, ok := tb[k]
			if !ok || !equal(va, vb) {
				return false
			}
		}
		return true
	case []any:
		tb, ok := b.([]any)
		if !ok || len(ta) != len(tb) {
			return false
		}
		for i := range ta {
			if !equal(ta[i], tb[i]) {
				return false
			}
		}
		return true
	case string, float64, bool, nil:
		return a == b
	}
	return false
}

func sortedKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
