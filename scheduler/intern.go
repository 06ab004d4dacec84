package scheduler

// interner maps strings to dense int32 IDs so the hot path compares
// integers, not strings. Only node updates add strings; pods only look
// strings up, so scheduling never grows the table.
type interner struct {
	ids  map[string]int32
	strs []string
}

func newInterner() *interner {
	in := &interner{ids: make(map[string]int32)}
	in.intern("") // ID 0 is the empty string
	return in
}

func (in *interner) intern(s string) int32 {
	if id, ok := in.ids[s]; ok {
		return id
	}
	id := int32(len(in.strs))
	in.ids[s] = id
	in.strs = append(in.strs, s)
	return id
}

// lookup returns the ID of s, or -1 when s was never interned (no node
// carries it, so nothing can match it).
func (in *interner) lookup(s string) int32 {
	if id, ok := in.ids[s]; ok {
		return id
	}
	return -1
}

func (in *interner) str(id int32) string {
	if id < 0 || int(id) >= len(in.strs) {
		return ""
	}
	return in.strs[id]
}
