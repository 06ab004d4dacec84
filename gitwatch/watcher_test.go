package gitwatch

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A scenario starts from one pushed commit ("c0"), runs the watcher, then
// pushes batches of commits and expects one Revision per new commit.
type commitSpec struct {
	label   string
	files   map[string]string // "" content deletes
	resetTo string            // `git reset --hard` to this label first
}

type wantRev struct {
	label    string
	old      string // label of OldCommit
	changed  bool
	force    bool
	rollouts []string // "name=image", sorted by key
	files    []string // Set.Files
	errFiles []string // files with error diagnostics
}

type pushStep struct {
	commits []commitSpec
	force   bool
	want    []wantRev
}

func TestWatcherScenarios(t *testing.T) {
	a1 := rolloutYAML("a", "shop/a:v1")
	a2 := rolloutYAML("a", "shop/a:v2")
	b1 := rolloutYAML("b", "shop/b:v1")
	initial := map[string]string{"rollouts/a.yaml": a1, "rollouts/b.yaml": b1, "README.md": "hello\n"}
	first := wantRev{label: "c0", changed: true, rollouts: []string{"a=shop/a:v1", "b=shop/b:v1"},
		files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}}

	tests := []struct {
		name  string
		path  string
		steps []pushStep
	}{
		{
			name: "one commit",
			path: "rollouts",
			steps: []pushStep{{
				commits: []commitSpec{{label: "c1", files: map[string]string{"rollouts/a.yaml": a2}}},
				want: []wantRev{{label: "c1", old: "c0", changed: true, rollouts: []string{"a=shop/a:v2", "b=shop/b:v1"},
					files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}}},
			}},
		},
		{
			name: "several commits between polls arrive one by one, oldest first",
			path: "rollouts",
			steps: []pushStep{{
				commits: []commitSpec{
					{label: "c1", files: map[string]string{"rollouts/a.yaml": a2}},
					{label: "c2", files: map[string]string{"README.md": "docs only\n"}},
					{label: "c3", files: map[string]string{"rollouts/a.yaml": a1}},
				},
				want: []wantRev{
					{label: "c1", old: "c0", changed: true, rollouts: []string{"a=shop/a:v2", "b=shop/b:v1"},
						files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}},
					{label: "c2", old: "c1", changed: false, rollouts: []string{"a=shop/a:v2", "b=shop/b:v1"},
						files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}},
					{label: "c3", old: "c2", changed: true, rollouts: []string{"a=shop/a:v1", "b=shop/b:v1"},
						files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}},
				},
			}},
		},
		{
			name: "force push yields the new head only, flagged, with the old SHA",
			path: "rollouts",
			steps: []pushStep{
				{
					commits: []commitSpec{{label: "c1", files: map[string]string{"rollouts/a.yaml": a2}}},
					want: []wantRev{{label: "c1", old: "c0", changed: true, rollouts: []string{"a=shop/a:v2", "b=shop/b:v1"},
						files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}}},
				},
				{
					commits: []commitSpec{
						{label: "r1", resetTo: "c0", files: map[string]string{"README.md": "rewritten\n"}},
						{label: "r2", files: map[string]string{"rollouts/b.yaml": rolloutYAML("b", "shop/b:v9")}},
					},
					force: true,
					want: []wantRev{{label: "r2", old: "c1", changed: true, force: true,
						rollouts: []string{"a=shop/a:v1", "b=shop/b:v9"}, files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}}},
				},
			},
		},
		{
			name: "deleting a strategy file drops its rollout",
			path: "rollouts",
			steps: []pushStep{{
				commits: []commitSpec{{label: "c1", files: map[string]string{"rollouts/b.yaml": ""}}},
				want: []wantRev{{label: "c1", old: "c0", changed: true, rollouts: []string{"a=shop/a:v1"},
					files: []string{"rollouts/a.yaml"}}},
			}},
		},
		{
			name: "invalid YAML in one file is an error for that file only",
			path: "rollouts",
			steps: []pushStep{{
				commits: []commitSpec{{label: "c1", files: map[string]string{"rollouts/b.yaml": "kind: [unclosed\n"}}},
				want: []wantRev{{label: "c1", old: "c0", changed: true, rollouts: []string{"a=shop/a:v1"},
					files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}, errFiles: []string{"rollouts/b.yaml"}}},
			}},
		},
		{
			name: "a commit outside the path is not a change",
			path: "rollouts",
			steps: []pushStep{{
				commits: []commitSpec{{label: "c1", files: map[string]string{"README.md": "more docs\n"}}},
				want: []wantRev{{label: "c1", old: "c0", changed: false, rollouts: []string{"a=shop/a:v1", "b=shop/b:v1"},
					files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}}},
			}},
		},
		{
			name: "removing the whole path is reported, not silently empty",
			path: "rollouts",
			steps: []pushStep{{
				commits: []commitSpec{{label: "c1", files: map[string]string{"rollouts/a.yaml": "", "rollouts/b.yaml": ""}}},
				want:    []wantRev{{label: "c1", old: "c0", changed: true, errFiles: []string{"rollouts"}}},
			}},
		},
		{
			name: "repository root as path sees every commit as a change",
			path: "",
			steps: []pushStep{{
				commits: []commitSpec{{label: "c1", files: map[string]string{"README.md": "more docs\n"}}},
				want: []wantRev{{label: "c1", old: "c0", changed: true, rollouts: []string{"a=shop/a:v1", "b=shop/b:v1"},
					files: []string{"rollouts/a.yaml", "rollouts/b.yaml"}}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t)
			shas := map[string]string{"c0": u.commit("c0", initial)}
			u.push()
			opts := testOptions(t, u.bare)
			opts.Path = tt.path
			h := startWatcher(t, opts)
			r0 := h.next(10 * time.Second)
			checkRev(t, r0, first, shas)
			prev := r0.Set
			for _, st := range tt.steps {
				for _, c := range st.commits {
					if c.resetTo != "" {
						u.git("reset", "-q", "--hard", shas[c.resetTo])
					}
					shas[c.label] = u.commit(c.label, c.files)
				}
				if st.force {
					u.push("--force")
				} else {
					u.push()
				}
				h.w.Trigger()
				for _, want := range st.want {
					got := h.next(10 * time.Second)
					checkRev(t, got, want, shas)
					if !want.changed && got.Set != prev {
						t.Errorf("%s: unchanged path should share the previous Set", want.label)
					}
					prev = got.Set
				}
			}
			if s := h.w.Status(); s.LastError != "" || s.Branch != "main" || s.LastCommit == "" {
				t.Errorf("status = %+v", s)
			}
		})
	}
}

func checkRev(t *testing.T, got Revision, want wantRev, shas map[string]string) {
	t.Helper()
	label := func(sha string) string {
		for l, s := range shas {
			if s == sha {
				return l
			}
		}
		return sha
	}
	if got.Commit != shas[want.label] {
		t.Fatalf("revision %s, want %s", label(got.Commit), want.label)
	}
	if want.old != "" && got.OldCommit != shas[want.old] || want.old == "" && got.OldCommit != "" {
		t.Errorf("%s: old commit %s, want %q", want.label, label(got.OldCommit), want.old)
	}
	if got.Changed != want.changed || got.ForcePush != want.force {
		t.Errorf("%s: changed=%v force=%v, want %v %v", want.label, got.Changed, got.ForcePush, want.changed, want.force)
	}
	if got.Author != "Ada <ada@example.com>" || strings.TrimSpace(got.Message) != want.label || got.Time.IsZero() || got.Branch != "main" {
		t.Errorf("%s: metadata author=%q message=%q time=%v branch=%q", want.label, got.Author, got.Message, got.Time, got.Branch)
	}
	if got.Set == nil {
		t.Fatalf("%s: nil Set", want.label)
	}
	var rollouts, errFiles []string
	for _, r := range got.Set.Rollouts {
		rollouts = append(rollouts, r.Name+"="+r.Version)
	}
	for _, d := range got.Set.Diagnostics.Errors() {
		if !slices.Contains(errFiles, d.File) {
			errFiles = append(errFiles, d.File)
		}
	}
	if !slices.Equal(rollouts, want.rollouts) {
		t.Errorf("%s: rollouts %v, want %v", want.label, rollouts, want.rollouts)
	}
	if !slices.Equal(errFiles, want.errFiles) {
		t.Errorf("%s: error files %v, want %v (diagnostics %v)", want.label, errFiles, want.errFiles, got.Set.Diagnostics)
	}
	if want.files != nil && !slices.Equal(got.Set.Files, want.files) {
		t.Errorf("%s: files %v, want %v", want.label, got.Set.Files, want.files)
	}
}
