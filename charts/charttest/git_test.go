package charttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// gitRepo is a bare origin that sluice follows and a work tree the test
// pushes from, with the real git CLI.
type gitRepo struct {
	origin, work string
	mu           sync.Mutex // one push at a time
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	dir := t.TempDir()
	r := &gitRepo{origin: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work")}
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", r.origin},
		{"init", "--quiet", "--initial-branch=main", r.work},
		{"-C", r.work, "remote", "add", "origin", r.origin},
	} {
		if err := git(args...); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// push commits files and pushes them to main. It returns the error
// instead of failing the test: goroutines other than the test's call it.
func (r *gitRepo) push(msg string, files map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, body := range files {
		if err := os.WriteFile(filepath.Join(r.work, p), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"-C", r.work, "add", "--all"},
		{"-C", r.work, "commit", "--quiet", "-m", msg},
		{"-C", r.work, "push", "--quiet", "origin", "HEAD:refs/heads/main"},
	} {
		if err := git(args...); err != nil {
			return err
		}
	}
	return nil
}

// git runs the git CLI with no user or system configuration.
func git(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{"-c", "user.name=charttest", "-c", "user.email=charttest@sluice.invalid", "-c", "commit.gpgsign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// sluiceBin builds cmd/sluice from the repository once per test binary
// ($SLUICE_BIN instead, when set: a binary built elsewhere).
func sluiceBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binPath = os.Getenv("SLUICE_BIN"); binPath != "" {
			return
		}
		dir, err := os.MkdirTemp("", "charttest-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/sluice")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/sluice: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var (
	flagsOnce sync.Once
	stateOK   bool
)

// hasStateFlags says whether sluice run has --state-store and
// --leader-elect (the state-in-the-cluster work), which the chart passes:
// with them the RBAC tests run sluice as the chart does.
func hasStateFlags(t *testing.T) bool {
	t.Helper()
	bin := sluiceBin(t)
	flagsOnce.Do(func() {
		out, _ := exec.Command(bin, "run", "--help").CombinedOutput()
		stateOK = bytes.Contains(out, []byte("--state-store")) && bytes.Contains(out, []byte("--leader-elect"))
	})
	return stateOK
}
