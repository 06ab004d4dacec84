package gateway

import (
	"fmt"
	"slices"
	"testing"
)

func TestChangeLogSince(t *testing.T) {
	var l *changeLog
	gens := []struct {
		from  uint64
		names []string
	}{{0, []string{"a", "b"}}, {1, []string{"b", "c"}}, {4, []string{"d"}}}
	for _, g := range gens {
		l = newChangeLog(g.from, g.names, l)
	}
	for _, tc := range []struct {
		gen  uint64
		want []string
		ok   bool
	}{
		{4, []string{"d"}, true},
		{1, []string{"b", "c", "d"}, true},
		{0, []string{"a", "b", "c", "d"}, true},
		{2, nil, false}, // never a generation of this type
	} {
		got, ok := l.since(tc.gen)
		slices.Sort(got)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("since(%d) = %v, %v; want %v, %v", tc.gen, got, ok, tc.want, tc.ok)
		}
	}
}

func TestChangeLogAnyChangedSince(t *testing.T) {
	var l *changeLog
	for _, g := range []struct {
		from  uint64
		names []string
	}{{0, []string{"a", "b"}}, {1, []string{"b", "c"}}, {4, []string{"d"}}} {
		l = newChangeLog(g.from, g.names, l)
	}
	for _, tc := range []struct {
		gen         uint64
		names       []string
		changed, ok bool
	}{
		{4, []string{"d"}, true, true},
		{4, []string{"a", "b", "c"}, false, true}, // changed before 4 only
		{1, []string{"a", "e"}, false, true},
		{0, []string{"a", "e"}, true, true},
		{1, []string{"c", "x"}, true, true},
		{2, []string{"a"}, false, false},    // never a generation of this type
		{2, []string{"d", "z"}, true, true}, // changed in what the log holds
		{0, nil, false, true},               // no subscribed name
		{4, []string{"c", "d", "e"}, true, true},
	} {
		changed, ok := l.anyChangedSince(tc.gen, tc.names)
		if changed != tc.changed || ok != tc.ok {
			t.Errorf("anyChangedSince(%d, %v) = %v, %v; want %v, %v", tc.gen, tc.names, changed, ok, tc.changed, tc.ok)
		}
	}
}

func TestChangeLogBounded(t *testing.T) {
	var l *changeLog
	for g := range uint64(3 * changeLogGenerations) {
		l = newChangeLog(g, []string{fmt.Sprint(g)}, l)
	}
	if _, ok := l.since(uint64(3*changeLogGenerations - changeLogGenerations)); !ok {
		t.Errorf("the last %d generations are not reachable", changeLogGenerations)
	}
	if _, ok := l.since(uint64(3*changeLogGenerations - changeLogGenerations - 1)); ok {
		t.Errorf("more than %d generations are kept", changeLogGenerations)
	}
	big := make([]string, changeLogNames-1)
	for i := range big {
		big[i] = fmt.Sprint("n", i)
	}
	l = newChangeLog(1000, big, l)
	l = newChangeLog(1001, []string{"x"}, l)
	if _, ok := l.since(1000); !ok {
		t.Error("the generation that holds the name budget is not reachable")
	}
	if _, ok := l.since(uint64(3*changeLogGenerations - 1)); ok {
		t.Errorf("more than %d names are kept", changeLogNames)
	}
}
