package gitwatch

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// TestRecall walks real git history pushed with the git CLI: the version
// before the head's, skipping commits that did not touch the file or broke
// it, and nothing before the file was added.
func TestRecall(t *testing.T) {
	u := newUpstream(t)
	key := api.Key{Namespace: "default", Name: "a"}
	shas := map[string]string{}
	shas["v1"] = u.commit("a v1", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v1")})
	shas["docs"] = u.commit("docs", map[string]string{"README.md": "hello\n"})
	shas["v2"] = u.commit("a v2", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v2")})
	shas["broken"] = u.commit("broken", map[string]string{"rollouts/a.yaml": "kind: Rollout\nmetadata: {name: a}\nspec: [\n"})
	shas["b1"] = u.commit("b v1", map[string]string{"rollouts/b.yaml": rolloutYAML("b", "shop/b:v1")})
	shas["v3"] = u.commit("a v3", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v3")})
	u.push()

	opts := testOptions(t, u.bare)
	opts.Path = "rollouts"
	h := startWatcher(t, opts)
	head := h.next(10 * time.Second)
	if head.Commit != shas["v3"] {
		t.Fatalf("head %s, want %s", head.Commit, shas["v3"])
	}
	notVersion := func(v string) func(*api.Rollout) bool {
		return func(r *api.Rollout) bool { return r.Version != v }
	}
	tests := []struct {
		name        string
		commit      string
		key         api.Key
		file        string
		accept      func(*api.Rollout) bool
		wantVersion string
		wantCommit  string
	}{
		{"skips the broken commit to the version before", shas["v3"], key, "rollouts/a.yaml", notVersion("shop/a:v3"), "shop/a:v2", shas["v2"]},
		{"skips versions the query does not accept", shas["v3"], key, "rollouts/a.yaml", func(r *api.Rollout) bool { return r.Version == "shop/a:v1" }, "shop/a:v1", shas["docs"]},
		{"the newest commit holding the version found", shas["v2"], key, "rollouts/a.yaml", notVersion("shop/a:v2"), "shop/a:v1", shas["docs"]},
		{"nothing before the file was added", shas["v1"], key, "rollouts/a.yaml", notVersion("shop/a:v1"), "", ""},
		{"a rollout added at the head has no history", shas["v3"], api.Key{Namespace: "default", Name: "b"}, "rollouts/b.yaml", notVersion("shop/b:v1"), "", ""},
		{"nothing when no version is accepted", shas["v3"], key, "rollouts/a.yaml", func(*api.Rollout) bool { return false }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := h.w.Recall(ctx, RecallQuery{Commit: tt.commit, Key: tt.key, File: tt.file, Accept: tt.accept})
			if err != nil {
				t.Fatal(err)
			}
			version := ""
			if got.Rollout != nil {
				version = got.Rollout.Version
			}
			if version != tt.wantVersion || got.Commit != tt.wantCommit {
				t.Fatalf("got %q at %s, want %q at %s", version, got.Commit, tt.wantVersion, tt.wantCommit)
			}
		})
	}
}

// TestRecallWhileSending: a Recall made while the watcher waits to hand
// out the next Revision is answered (the daemon recalls while it applies
// the previous one), not deadlocked.
func TestRecallWhileSending(t *testing.T) {
	u := newUpstream(t)
	u.commit("a v1", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v1")})
	u.push()
	opts := testOptions(t, u.bare)
	opts.Path = "rollouts"
	h := startWatcher(t, opts)
	h.next(10 * time.Second)
	v2 := u.commit("a v2", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v2")})
	u.commit("a v3", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v3")})
	u.push()
	h.w.Trigger()
	// The watcher now blocks handing out v2's Revision: nobody reads.
	eventually(t, 10*time.Second, "the watcher to fetch", func() bool { return fetchCount(t, h.reg, resultOK) >= 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := h.w.Recall(ctx, RecallQuery{Commit: v2, Key: api.Key{Namespace: "default", Name: "a"}, File: "rollouts/a.yaml",
		Accept: func(r *api.Rollout) bool { return r.Version != "shop/a:v2" }})
	if err != nil {
		t.Fatal(err)
	}
	if got.Rollout == nil || got.Rollout.Version != "shop/a:v1" {
		t.Fatalf("got %+v, want shop/a:v1", got)
	}
	if rev := h.next(10 * time.Second); rev.Commit != v2 {
		t.Fatalf("next revision %s, want %s", rev.Commit, v2)
	}
}
