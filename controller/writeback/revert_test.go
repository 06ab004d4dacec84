package writeback

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gitwatch"
)

const (
	v1 = "shop/checkout:v1"
	v2 = "shop/checkout:v2"
	v3 = "shop/checkout:v3"
)

var checkout = api.Key{Namespace: "default", Name: "checkout"}

// upstream is a bare origin and a clone the test commits in with the real
// git command, as a human would.
type upstream struct {
	t            *testing.T
	origin, work string
}

func newUpstream(t *testing.T, origin string) *upstream {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	u := &upstream{t: t, origin: origin, work: filepath.Join(t.TempDir(), "work")}
	u.git("init", "--quiet", "--bare", "--initial-branch=main", origin)
	u.git("init", "--quiet", "--initial-branch=main", u.work)
	u.git("-C", u.work, "remote", "add", "origin", origin)
	return u
}

func (u *upstream) git(args ...string) string {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{"-c", "user.name=human", "-c", "user.email=human@example.invalid", "-c", "commit.gpgsign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		u.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return strings.TrimSpace(out.String())
}

// commit writes files, commits and pushes (with force when asked); it
// returns the commit.
func (u *upstream) commit(msg string, files map[string]string, force bool) string {
	u.t.Helper()
	u.git("-C", u.work, "fetch", "--quiet", "origin")
	if out := u.git("-C", u.work, "ls-remote", "origin", "main"); out != "" && !force {
		u.git("-C", u.work, "reset", "--quiet", "--hard", "origin/main")
	}
	for p, body := range files {
		full := filepath.Join(u.work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			u.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			u.t.Fatal(err)
		}
	}
	u.git("-C", u.work, "add", "--all")
	u.git("-C", u.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	args := []string{"-C", u.work, "push", "--quiet", "origin", "HEAD:refs/heads/main"}
	if force {
		args = append(args, "--force")
	}
	u.git(args...)
	return u.git("-C", u.work, "rev-parse", "HEAD")
}

func (u *upstream) head() string { return u.git("--git-dir", u.origin, "rev-parse", "refs/heads/main") }

// show returns the file at rev in origin.
func (u *upstream) show(rev, file string) string {
	return u.git("--git-dir", u.origin, "show", rev+":"+file)
}

// assertImageLineDiff checks that rev changes exactly one line, from the
// failed image to the stable one, in file.
func (u *upstream) assertImageLineDiff(rev, file string) {
	u.t.Helper()
	diff := u.git("--git-dir", u.origin, "diff", "--unified=0", rev+"~1", rev)
	var minus, plus []string
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
			if !strings.HasSuffix(l, "/"+file) && l != "--- /dev/null" {
				u.t.Errorf("diff touches another file: %s", l)
			}
		case strings.HasPrefix(l, "-"):
			minus = append(minus, l)
		case strings.HasPrefix(l, "+"):
			plus = append(plus, l)
		}
	}
	if len(minus) != 1 || len(plus) != 1 || !strings.Contains(minus[0], v2) || !strings.Contains(plus[0], v1) ||
		strings.Replace(minus[0][1:], v2, v1, 1) != plus[0][1:] {
		u.t.Errorf("diff is not exactly the image line:\n%s", diff)
	}
}

// rolloutFile is a multi-document strategy file with comments and anchors.
func rolloutFile(image string) string {
	return strings.Replace(multiDoc, `&img "shop/checkout:v2"`, `&img "`+image+`"`, 1)
}

func newTestReverter(t *testing.T, remote *gitwatch.Remote, pushBranch string) *Reverter {
	t.Helper()
	r, err := NewReverter(ReverterOptions{Remote: remote, Branch: func() string { return "main" }, Path: "deploy",
		PushBranch: pushBranch, CacheDir: filepath.Join(t.TempDir(), "cache"),
		Now: func() time.Time { return time.Date(2026, 12, 3, 4, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func localRemote(t *testing.T, u *upstream) *gitwatch.Remote {
	t.Helper()
	rem, err := gitwatch.NewRemote(u.origin, gitwatch.Auth{})
	if err != nil {
		t.Fatal(err)
	}
	return rem
}

// startCanary pushes the stable version, then the canary commit; it
// returns the canary commit.
func startCanary(u *upstream) string {
	u.commit("v1", map[string]string{"deploy/checkout.yaml": rolloutFile(v1), "README": "docs\n"}, false)
	return u.commit("v2", map[string]string{"deploy/checkout.yaml": rolloutFile(v2)}, false)
}

func request(commit string) RevertRequest {
	return RevertRequest{Rollout: checkout, Failed: v2, Stable: v1, Commit: commit,
		Reason: "analysis success-rate failed: result 0.91 < 0.99"}
}

func TestRevertRaces(t *testing.T) {
	tests := []struct {
		name string
		// human runs between the reverter's fetch and its push.
		human       func(u *upstream) string
		wantOutcome Outcome
		// wantParentIsHuman: the revert sits on the human's commit.
		wantParentIsHuman bool
	}{
		{name: "no race", wantOutcome: Reverted},
		{name: "human commits another file", wantOutcome: Reverted, wantParentIsHuman: true,
			human: func(u *upstream) string { return u.commit("docs", map[string]string{"README": "more docs\n"}, false) }},
		{name: "human edits the same file elsewhere", wantOutcome: Reverted, wantParentIsHuman: true,
			human: func(u *upstream) string {
				return u.commit("comment", map[string]string{"deploy/checkout.yaml": "# reviewed\n" + rolloutFile(v2)}, false)
			}},
		{name: "human pushes a new version", wantOutcome: Superseded,
			human: func(u *upstream) string {
				return u.commit("v3", map[string]string{"deploy/checkout.yaml": rolloutFile(v3)}, false)
			}},
		{name: "human force-pushes the branch back to stable", wantOutcome: AlreadyStable,
			// The old head is an ancestor of the revert, so only the lease
			// keeps the push from undoing the human's rewrite.
			human: func(u *upstream) string {
				u.git("-C", u.work, "push", "--quiet", "--force", "origin", "HEAD~1:refs/heads/main")
				return u.git("-C", u.work, "rev-parse", "HEAD~1")
			}},
		{name: "human force-pushes the branch", wantOutcome: Reverted, wantParentIsHuman: true,
			human: func(u *upstream) string {
				u.git("-C", u.work, "reset", "--quiet", "--hard", "HEAD~1")
				return u.commit("v2 again, rewritten", map[string]string{"deploy/checkout.yaml": rolloutFile(v2), "NOTES": "x\n"}, true)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, filepath.Join(t.TempDir(), "origin.git"))
			canary := startCanary(u)
			r := newTestReverter(t, localRemote(t, u), "")
			var human string
			r.beforePush = func(attempt int) {
				if attempt == 1 && tt.human != nil {
					human = tt.human(u)
				}
			}
			res, err := r.Revert(context.Background(), request(canary))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.wantOutcome {
				t.Fatalf("outcome %s (%s), want %s", res.Outcome, res.Message, tt.wantOutcome)
			}
			if tt.wantOutcome != Reverted {
				if u.head() != human {
					t.Errorf("branch at %s, want the human's %s untouched", u.head(), human)
				}
				if tt.wantOutcome == Superseded && !strings.Contains(res.Message, v3) {
					t.Errorf("message %q does not say what the branch names", res.Message)
				}
				return
			}
			if u.head() != res.Commit {
				t.Fatalf("branch at %s, want the revert %s", u.head(), res.Commit)
			}
			u.assertImageLineDiff(res.Commit, "deploy/checkout.yaml")
			parent := u.git("--git-dir", u.origin, "rev-parse", res.Commit+"~1")
			if tt.wantParentIsHuman && parent != human || !tt.wantParentIsHuman && parent != canary {
				t.Errorf("revert's parent %s (canary %s, human %s)", parent, canary, human)
			}
			trailers := u.git("--git-dir", u.origin, "log", "-1", "--format=%(trailers:only,unfold)", res.Commit)
			if want := "Sluice-Rollout: default/checkout\nSluice-Aborted-Commit: " + canary; trailers != want {
				t.Errorf("trailers %q, want %q", trailers, want)
			}
			subject := u.git("--git-dir", u.origin, "log", "-1", "--format=%s", res.Commit)
			for _, s := range []string{"default/checkout", v1, v2} {
				if !strings.Contains(subject, s) {
					t.Errorf("subject %q does not name %s", subject, s)
				}
			}
			// A second request (a replay after a crash) finds it done.
			again, err := r.Revert(context.Background(), request(canary))
			if err != nil || again.Outcome != AlreadyStable {
				t.Errorf("second revert: %+v, %v; want %s", again, err, AlreadyStable)
			}
		})
	}
}

// TestRevertToOwnBranch: --git-writeback-branch leaves the followed branch
// alone and puts the revert on a branch of its own, replaced on each push.
func TestRevertToOwnBranch(t *testing.T) {
	u := newUpstream(t, filepath.Join(t.TempDir(), "origin.git"))
	canary := startCanary(u)
	r := newTestReverter(t, localRemote(t, u), "sluice/revert-checkout")
	res, err := r.Revert(context.Background(), request(canary))
	if err != nil || res.Outcome != Reverted || res.Branch != "sluice/revert-checkout" {
		t.Fatalf("revert: %+v, %v", res, err)
	}
	if u.head() != canary {
		t.Errorf("followed branch moved to %s", u.head())
	}
	if got := u.git("--git-dir", u.origin, "rev-parse", "refs/heads/sluice/revert-checkout"); got != res.Commit {
		t.Errorf("revert branch at %s, want %s", got, res.Commit)
	}
	u.assertImageLineDiff(res.Commit, "deploy/checkout.yaml")
}

// TestRevertRefusedByServer: a push the server refuses while the branch
// stays put (a hook, missing permissions) is an error for the outbox to
// retry, not a race: it is not tried again at once, nothing is pushed, and
// a later retry succeeds.
func TestRevertRefusedByServer(t *testing.T) {
	u := newUpstream(t, filepath.Join(t.TempDir(), "origin.git"))
	canary := startCanary(u)
	hook := filepath.Join(u.origin, "hooks", "pre-receive")
	pushes := filepath.Join(t.TempDir(), "pushes")
	script := "#!/bin/sh\necho push >> " + pushes + "\necho protected branch >&2\nexit 1\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := newTestReverter(t, localRemote(t, u), "")
	if _, err := r.Revert(context.Background(), request(canary)); err == nil {
		t.Fatal("revert pushed through a refusing server")
	}
	if u.head() != canary {
		t.Fatalf("branch moved to %s", u.head())
	}
	if b, _ := os.ReadFile(pushes); strings.Count(string(b), "push") != 1 {
		t.Errorf("%d pushes, want 1: the branch did not move, so there is nothing to re-apply", strings.Count(string(b), "push"))
	}
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	res, err := r.Revert(context.Background(), request(canary))
	if err != nil || res.Outcome != Reverted || u.head() != res.Commit {
		t.Fatalf("retry: %+v, %v", res, err)
	}
}
