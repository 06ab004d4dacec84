package gitwatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// upstream is a bare repository and a work tree that pushes to it, both
// driven with the real git CLI.
type upstream struct {
	t    testing.TB
	bare string
	work string
	env  []string
}

func newUpstream(t testing.TB) *upstream {
	t.Helper()
	return newUpstreamAt(t, "")
}

// newUpstreamAt puts the bare repository at bare (a temp dir when "").
func newUpstreamAt(t testing.TB, bare string) *upstream {
	t.Helper()
	dir := t.TempDir()
	if bare == "" {
		bare = filepath.Join(dir, "remote.git")
	}
	u := &upstream{t: t, bare: bare, work: filepath.Join(dir, "work")}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// An empty HOME and no system config: the user's git settings never
	// leak into the tests.
	u.env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com")
	u.run(dir, "init", "-q", "--bare", "-b", "main", u.bare)
	u.run(dir, "init", "-q", "-b", "main", u.work)
	u.git("remote", "add", "origin", u.bare)
	return u
}

func (u *upstream) run(dir string, args ...string) string {
	u.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = u.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		u.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (u *upstream) git(args ...string) string {
	u.t.Helper()
	return u.run(u.work, args...)
}

// commit writes files (an empty content deletes the file), commits them
// and returns the commit SHA. It does not push.
func (u *upstream) commit(msg string, files map[string]string) string {
	u.t.Helper()
	for name, content := range files {
		p := filepath.Join(u.work, filepath.FromSlash(name))
		if content == "" {
			u.git("rm", "-q", "--", name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			u.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			u.t.Fatal(err)
		}
		u.git("add", "--", name)
	}
	u.git("commit", "-q", "--allow-empty", "-m", msg)
	return u.git("rev-parse", "HEAD")
}

// push pushes the work tree's HEAD to the remote's main branch.
func (u *upstream) push(extra ...string) {
	u.t.Helper()
	u.git(append([]string{"push", "-q"}, append(extra, "origin", "HEAD:main")...)...)
}

func rolloutYAML(name, image string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - {name: app, image: "%[2]s"}
  strategy:
    canary:
      steps:
      - setWeight: 10
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: %[1]s.internal
            endpoints:
              "%[2]s": ["127.0.0.1:9001"]
`, name, image)
}

// harness runs a Watcher in the background and collects its Revisions.
type harness struct {
	t    testing.TB
	w    *Watcher
	revs chan Revision
	logs *testkit.SyncBuffer
	reg  *prometheus.Registry
	stop func()
}

// testOptions fills what every test needs; callers override the rest.
func testOptions(t testing.TB, repo string) Options {
	return Options{
		Repo:     repo,
		CacheDir: filepath.Join(t.TempDir(), "cache"),
		Interval: time.Hour,
	}
}

// startWatcher starts a watcher in the background; setup runs between New
// and Run (to set test hooks without racing the Run goroutine).
func startWatcher(t testing.TB, opts Options, setup ...func(*Watcher)) *harness {
	t.Helper()
	h := &harness{t: t, revs: make(chan Revision), logs: &testkit.SyncBuffer{}, reg: prometheus.NewRegistry()}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(h.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.Registry = h.reg
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	for _, f := range setup {
		f(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, h.revs) }()
	h.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	t.Cleanup(h.stop)
	return h
}

// next waits for the next Revision.
func (h *harness) next(timeout time.Duration) Revision {
	h.t.Helper()
	select {
	case r := <-h.revs:
		return r
	case <-time.After(timeout):
		h.t.Fatalf("no revision within %s; status %+v\nlogs:\n%s", timeout, h.w.Status(), h.logs.String())
		return Revision{}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fetchCount is how many fetches sluice_git_fetch_seconds has observed with
// the given result.
func fetchCount(t testing.TB, reg *prometheus.Registry, result string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_git_fetch_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
