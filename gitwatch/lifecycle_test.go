package gitwatch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestRestart checks restart safety: given the last processed commit, a new
// watcher (same cache or a fresh one) neither replays it nor skips what was
// pushed while it was down.
func TestRestart(t *testing.T) {
	tests := []struct {
		name       string
		freshCache bool
	}{
		{name: "same cache"},
		{name: "fresh cache", freshCache: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t)
			c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
			u.push()
			opts := testOptions(t, u.bare)
			h := startWatcher(t, opts)
			if r := h.next(10 * time.Second); r.Commit != c0 {
				t.Fatalf("first revision %s, want %s", r.Commit, c0)
			}
			h.stop()

			c1 := u.commit("c1", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v2")})
			c2 := u.commit("c2", map[string]string{"b.yaml": rolloutYAML("b", "shop/b:v1")})
			u.push()
			opts.LastCommit = c0
			if tt.freshCache {
				opts.CacheDir = filepath.Join(t.TempDir(), "other")
			}
			h = startWatcher(t, opts)
			for _, want := range []string{c1, c2} {
				r := h.next(10 * time.Second)
				if r.Commit != want || !r.Changed || r.ForcePush {
					t.Fatalf("revision %s changed=%v force=%v, want %s changed", r.Commit, r.Changed, r.ForcePush, want)
				}
			}
			h.stop()

			// Nothing new: no Revision at all, not even the head again.
			opts.LastCommit = c2
			h = startWatcher(t, opts)
			eventually(t, 10*time.Second, "a fetch", func() bool { return fetchCount(t, h.reg, resultOK) > 0 })
			select {
			case r := <-h.revs:
				t.Fatalf("replayed %s", r.Commit)
			default:
			}
			if s := h.w.Status(); s.LastCommit != c2 || s.LastError != "" {
				t.Errorf("status %+v", s)
			}
		})
	}
}

// TestCorruptCache damages the cache between runs; the watcher notices,
// says so in the log, re-clones and carries on from the last commit.
func TestCorruptCache(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
	}{
		{name: "garbage packs", corrupt: func(t *testing.T, dir string) {
			packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
			if len(packs) == 0 {
				t.Fatal("no packs to corrupt")
			}
			for _, p := range packs {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, make([]byte, fi.Size()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "missing objects", corrupt: func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "objects")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "garbage config", corrupt: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "config"), []byte("[[[ not git"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no HEAD", corrupt: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "HEAD")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t)
			c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
			u.push()
			opts := testOptions(t, u.bare)
			h := startWatcher(t, opts)
			h.next(10 * time.Second)
			h.stop()

			dirs, _ := filepath.Glob(filepath.Join(opts.CacheDir, "*.git"))
			if len(dirs) != 1 {
				t.Fatalf("cache dirs %v", dirs)
			}
			tt.corrupt(t, dirs[0])
			c1 := u.commit("c1", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v2")})
			u.push()

			opts.LastCommit = c0
			h = startWatcher(t, opts)
			r := h.next(10 * time.Second)
			if r.Commit != c1 || r.ForcePush || r.OldCommit != c0 {
				t.Fatalf("revision %s force=%v old=%s, want %s after %s", r.Commit, r.ForcePush, r.OldCommit, c1, c0)
			}
			if !strings.Contains(h.logs.String(), "git cache is corrupt, re-cloning") {
				t.Errorf("no re-clone log line:\n%s", h.logs)
			}
		})
	}
}

// TestRemoteDown: while the remote is missing the watcher reports the error
// and keeps retrying with back-off; once it is back the Revision arrives.
func TestRemoteDown(t *testing.T) {
	u := newUpstream(t)
	c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
	u.push()
	hidden := u.bare + ".away"
	if err := os.Rename(u.bare, hidden); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t, u.bare)
	h := startWatcher(t, opts)
	eventually(t, 10*time.Second, "two failed attempts", func() bool { return h.w.Status().Failures >= 2 })
	s := h.w.Status()
	if s.LastError == "" || !s.LastSuccess.IsZero() {
		t.Errorf("status while down: %+v", s)
	}
	if fetchCount(t, h.reg, resultError) < 2 {
		t.Errorf("error fetches not counted")
	}
	if err := os.Rename(hidden, u.bare); err != nil {
		t.Fatal(err)
	}
	r := h.next(15 * time.Second) // back-off is 1s, 2s, 4s: no trigger needed
	if r.Commit != c0 {
		t.Fatalf("revision %s, want %s", r.Commit, c0)
	}
	eventually(t, 5*time.Second, "status cleared", func() bool {
		s := h.w.Status()
		return s.LastError == "" && s.Failures == 0 && !s.LastSuccess.IsZero()
	})
}

// TestBranch follows the remote HEAD by default and a named branch when
// asked; pushes to other branches produce nothing.
func TestBranch(t *testing.T) {
	u := newUpstream(t)
	c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
	u.push()
	u.git("checkout", "-q", "-b", "dev")
	d1 := u.commit("d1", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:dev")})
	u.git("push", "-q", "origin", "dev")

	tests := []struct {
		branch string
		want   string
		status string
	}{
		{branch: "", want: c0, status: "main"},
		{branch: "dev", want: d1, status: "dev"},
		{branch: "refs/heads/dev", want: d1, status: "dev"},
	}
	for _, tt := range tests {
		t.Run("branch="+tt.branch, func(t *testing.T) {
			opts := testOptions(t, u.bare)
			opts.Branch = tt.branch
			h := startWatcher(t, opts)
			r := h.next(10 * time.Second)
			if r.Commit != tt.want || r.Branch != tt.status {
				t.Fatalf("revision %s on %q, want %s on %q", r.Commit, r.Branch, tt.want, tt.status)
			}
			if s := h.w.Status(); s.Branch != tt.status {
				t.Errorf("status branch %q", s.Branch)
			}
		})
	}
}

// TestRepoForms checks the accepted repository spellings and that what is
// shown in Status carries no user info. (An scp-like URL cannot name a port,
// so the SSH transport test uses ssh://.)
func TestRepoForms(t *testing.T) {
	tests := []struct {
		repo, protocol, display string
	}{
		{repo: "git@github.com:org/repo.git", protocol: "ssh", display: "ssh://github.com/org/repo.git"},
		{repo: "ssh://git@example.com:2222/org/repo.git", protocol: "ssh", display: "ssh://example.com:2222/org/repo.git"},
		{repo: "https://example.com/org/repo.git?ref=x#frag", protocol: "https", display: "https://example.com/org/repo.git"},
		{repo: "ssh://deploy@example.com/org/repo.git", protocol: "ssh", display: "ssh://example.com/org/repo.git"},
		{repo: "file:///srv/git/repo.git", protocol: "file", display: "file:///srv/git/repo.git"},
		{repo: "/srv/git/repo.git", protocol: "file", display: "file:///srv/git/repo.git"},
	}
	for _, tt := range tests {
		t.Run(tt.repo, func(t *testing.T) {
			w, err := New(Options{Repo: tt.repo, CacheDir: "/nonexistent"})
			if err != nil {
				t.Fatal(err)
			}
			if w.cfg.endpoint.Protocol != tt.protocol || w.Status().Repo != tt.display {
				t.Errorf("protocol %q display %q, want %q %q", w.cfg.endpoint.Protocol, w.Status().Repo, tt.protocol, tt.display)
			}
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "no repo", opts: Options{CacheDir: "/c"}, want: "repo is required"},
		{name: "no cache", opts: Options{Repo: "/r"}, want: "cache dir is required"},
		{name: "password in URL", opts: Options{Repo: "https://u:hunter22@example.com/r.git", CacheDir: "/c"}, want: "must not contain a password"},
		{name: "password in ssh URL", opts: Options{Repo: "ssh://git:hunter22@example.com/r.git", CacheDir: "/c"}, want: "must not contain a password"},
		{name: "token as https user name", opts: Options{Repo: "https://hunter22@example.com/r.git", CacheDir: "/c"}, want: "must not contain a user name over https"},
		{name: "user name over http", opts: Options{Repo: "http://hunter22@example.com/r.git", CacheDir: "/c"}, want: "--git-password-file"},
		{name: "negative timeout", opts: Options{Repo: "/r", CacheDir: "/c", Timeout: -time.Second}, want: "negative"},
		{name: "unsupported protocol", opts: Options{Repo: "git://example.com/r.git", CacheDir: "/c"}, want: "not supported"},
		{name: "short last commit", opts: Options{Repo: "/r", CacheDir: "/c", LastCommit: "abc"}, want: "full hex SHA-1"},
		{name: "negative interval", opts: Options{Repo: "/r", CacheDir: "/c", Interval: -time.Second}, want: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter22") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

// TestCompact: packs from many small fetches are merged once they pile up,
// and the cache keeps working afterwards.
func TestCompact(t *testing.T) {
	u := newUpstream(t)
	u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v0")})
	u.push()
	logs := &testkit.SyncBuffer{}
	opts := testOptions(t, u.bare)
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	w.cache.maxPacks = 3
	t.Cleanup(w.cache.close)
	t.Cleanup(w.cache.waitRepack)
	out := make(chan Revision, 1)
	for i := 1; i <= 6; i++ {
		if err := w.sync(context.Background(), out); err != nil {
			t.Fatal(err)
		}
		<-out
		u.commit(fmt.Sprint("c", i), map[string]string{"a.yaml": rolloutYAML("a", fmt.Sprint("shop/a:v", i))})
		u.push()
	}
	if w.cache.job != nil {
		<-w.cache.job.done // the repack runs beside; the next poll swaps it in
	}
	if err := w.sync(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.Set.Rollouts[0].Version != "shop/a:v6" {
		t.Fatalf("after compaction: version %s", r.Set.Rollouts[0].Version)
	}
	if !strings.Contains(logs.String(), "git cache repacked") {
		t.Fatalf("no repack logged:\n%s", logs)
	}
	packs, _ := filepath.Glob(filepath.Join(w.cache.dir, "objects", "pack", "*.pack"))
	// Without compaction: 7 (the clone and 6 fetches). With it: the
	// repacked one, the 2 fetched while it ran, the last fetch's.
	if len(packs) > 4 {
		t.Errorf("%d packs after compaction", len(packs))
	}
}

func TestCleanPath(t *testing.T) {
	tests := map[string]string{
		"": ".", ".": ".", "/": ".", "deploy": "deploy", "deploy/": "deploy", "./deploy": "deploy",
		"/deploy/rollouts/": "deploy/rollouts", "../../etc": "etc", " a/b ": "a/b",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			if got := cleanPath(in); got != want {
				t.Errorf("cleanPath(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func TestJitterAndBackoff(t *testing.T) {
	for range 1000 {
		if d := jitter(time.Second); d < 950*time.Millisecond || d > 1050*time.Millisecond {
			t.Fatalf("jitter(1s) = %s, outside ±5%%", d)
		}
	}
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second},
		{10, 5 * time.Minute}, {1000, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.failures), func(t *testing.T) {
			if got := backoff(tt.failures); got != tt.want {
				t.Errorf("backoff(%d) = %s, want %s", tt.failures, got, tt.want)
			}
		})
	}
}

// TestReplayLast: a restarted watcher asked to replay hands out the last
// processed commit again (with its Set) before anything newer, and only once.
func TestReplayLast(t *testing.T) {
	for _, tt := range []struct {
		name      string
		newCommit bool
	}{
		{name: "nothing pushed while down"},
		{name: "one commit pushed while down", newCommit: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t)
			c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
			var c1 string
			if tt.newCommit {
				c1 = u.commit("c1", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v2")})
			}
			u.push()
			opts := testOptions(t, u.bare)
			opts.LastCommit, opts.ReplayLast = c0, true
			h := startWatcher(t, opts)
			r := h.next(10 * time.Second)
			if !r.Replay || r.Commit != c0 || r.OldCommit != "" || !r.Changed || r.Set == nil || len(r.Set.Rollouts) != 1 {
				t.Fatalf("first revision is not the replay of %s: %+v", c0, r)
			}
			if tt.newCommit {
				r = h.next(10 * time.Second)
				if r.Replay || r.Commit != c1 || r.OldCommit != c0 {
					t.Fatalf("second revision %s replay=%v old=%s, want %s after %s", r.Commit, r.Replay, r.OldCommit, c1, c0)
				}
			}
			h.w.Trigger()
			eventually(t, 10*time.Second, "a second fetch", func() bool { return fetchCount(t, h.reg, resultOK) > 1 })
			select {
			case r := <-h.revs:
				t.Fatalf("replayed again: %s", r.Commit)
			default:
			}
		})
	}
}
