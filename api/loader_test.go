package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLoaderMatchesLoad: a Loader gives exactly what Load gives, across a
// sequence of edits, and re-parses only what changed.
func TestLoaderMatchesLoad(t *testing.T) {
	srcs, err := ReadSources(repo1000(20), ".", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLoader(Limits{})
	edits := []struct {
		name string
		edit func([]Source) []Source
	}{
		{"first load", func(s []Source) []Source { return s }},
		{"unchanged", func(s []Source) []Source { return s }},
		{"one image changed", func(s []Source) []Source {
			return replaceIn(s, "rollouts/svc-0003.yaml", "shop/svc-0003:v2", "shop/svc-0003:v1")
		}},
		{"one file broken", func(s []Source) []Source {
			return replaceIn(s, "rollouts/svc-0004.yaml", "setWeight: 50", "setWeight: 500")
		}},
		{"a template removed", func(s []Source) []Source { return s[1:] }},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			srcs = e.edit(srcs)
			want, got := Load(srcs), l.Load(srcs)
			if a, b := setJSON(t, want), setJSON(t, got); a != b {
				t.Fatalf("Loader result differs from Load:\n%s\n---\n%s", b, a)
			}
		})
	}
	before := l.files["rollouts/svc-0001.yaml"].p
	srcs = replaceIn(srcs, "rollouts/svc-0002.yaml", "pause: {}", "pause: {duration: 1m}")
	l.Load(srcs)
	if l.files["rollouts/svc-0001.yaml"].p != before {
		t.Error("an unchanged file was parsed again")
	}
}

func replaceIn(srcs []Source, name, old, new string) []Source {
	out := append([]Source(nil), srcs...)
	for i, s := range out {
		if s.Name == name {
			out[i].Data = []byte(strings.Replace(string(s.Data), old, new, 1))
		}
	}
	return out
}

func setJSON(t *testing.T, s *Set) string {
	t.Helper()
	b, err := json.Marshal(struct {
		R  []*Rollout
		T  []*AnalysisTemplate
		J  []Rejected
		D  Diagnostics
		F  []string
		U  []string
		Sk []SkippedDoc
	}{s.Rollouts, s.Templates, s.Rejected, s.Diagnostics, s.Files, s.Unreadable, s.Skipped})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
