package api

import "testing"

func TestLineIndexFindsEveryPathAndNoOther(t *testing.T) {
	lines := map[string]int{"": 1, "spec": 4, "spec.steps": 9, "spec.steps[0]": 10, "spec.steps[0].setWeight": 10, "a": 2, "ab": 3, "metadata[x.y]": 7}
	idx := freezeLines(lines)
	for path, want := range lines {
		if got, ok := idx.lookup(path); !ok || got != want {
			t.Errorf("lookup(%q) = %d, %v; want %d", path, got, ok, want)
		}
	}
	for _, path := range []string{"spe", "spec.step", "b", "steps", "spec.steps[0].", "x.y"} {
		if got, ok := idx.lookup(path); ok {
			t.Errorf("lookup(%q) = %d, found; want none", path, got)
		}
	}
}

func TestLineIndexSharesPathsOfOneShape(t *testing.T) {
	a := freezeLines(map[string]int{"spec": 1, "spec.replicas": 2})
	b := freezeLines(map[string]int{"spec": 5, "spec.replicas": 9})
	if a.paths[1].Value() != "spec.replicas" || a.paths[1] != b.paths[1] {
		t.Error("two documents of one shape hold two copies of their paths")
	}
	if l, _ := b.lookup("spec.replicas"); l != 9 {
		t.Errorf("line %d, want 9: the lines are each document's own", l)
	}
}
