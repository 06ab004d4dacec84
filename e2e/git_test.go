package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo is a bare origin the daemon follows and a clone the test
// commits in and pushes from, with the real git command.
type gitRepo struct {
	t      testing.TB
	origin string
	work   string
}

func newGitRepo(t testing.TB) *gitRepo {
	t.Helper()
	requireGit(t)
	dir := t.TempDir()
	r := &gitRepo{t: t, origin: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work")}
	r.git("init", "--quiet", "--bare", "--initial-branch=main", r.origin)
	r.git("init", "--quiet", "--initial-branch=main", r.work)
	r.git("-C", r.work, "remote", "add", "origin", r.origin)
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@sluice.invalid", "-c", "commit.gpgsign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// push writes files (path relative to the root → content; nil deletes),
// commits them and pushes to origin main. It returns the commit hash.
func (r *gitRepo) push(msg string, files map[string]string) string {
	r.t.Helper()
	for p, body := range files {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("-C", r.work, "add", "--all")
	r.git("-C", r.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	r.git("-C", r.work, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	return strings.TrimSpace(r.git("-C", r.work, "rev-parse", "HEAD"))
}
