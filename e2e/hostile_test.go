package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestHostileHistoryNoCrashLoop: while the daemon is down, the history
// gains one commit per hostile input (an alias cycle, a billion-laughs
// bomb, a file over the size limit, more files than the limit; the
// default limits but a lower file count), then a
// commit that fixes the file and starts a canary. Restarted on the same
// state, the daemon replays those commits: it must stay up, report each
// bad commit (strategy-invalid alert naming it, while v1 keeps running),
// apply the fix, and come up again on a second restart without replaying
// anything into a crash. Before the limits the first hostile commit killed
// the daemon on every start (stack overflow).
func TestHostileHistoryNoCrashLoop(t *testing.T) {
	t.Parallel()
	hook := startSink(t)
	repo := newGitRepo(t)
	state := filepath.Join(t.TempDir(), "state")
	const file = "rollouts/hostile.yaml"
	app := rolloutSpec{Name: "hostile", Host: "hostile.e2e", Version: v1,
		Endpoints: map[string]string{v1: "127.0.0.1:9", v2: "127.0.0.1:10"},
		Steps:     "- setWeight: 20\n- pause: {}\n"}
	repo.push("v1", map[string]string{file: app.yaml()})
	flags := []string{"--state-dir", state, "--alert-webhook", hook.srv.URL}
	d := startDaemon(t, repo, flags...)
	d.waitStatus(app.Name, 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	// Stop only once the commit is recorded as processed, or the restart
	// would start from the head alone.
	d.waitLog(`"msg":"revision applied"`, 30*time.Second)
	d.stop()

	hostile := []struct {
		name   string
		files  map[string]string
		reason string // in the strategy-invalid alert
	}{
		{"alias cycle", map[string]string{file: hostileYAML(t, "alias-cycle.yaml")}, "alias cycle is refused"},
		{"billion laughs", map[string]string{file: hostileYAML(t, "billion-laughs.yaml")}, "excessive aliasing is refused"},
		{"oversized file", map[string]string{file: app.yaml() + "# " + strings.Repeat("x", 2<<20) + "\n"}, "over the limit of 1048576 bytes"},
		// The file count limit is lowered for this one: 20,001 files make git
		// slow on a shared test machine; api's tests check the default.
		{"too many files", manyFiles(file, app.yaml(), 101), "more than 100 strategy files"},
	}
	commits := make([]string, len(hostile))
	for i, h := range hostile {
		repo.git("-C", repo.work, "rm", "-rq", "--ignore-unmatch", "rollouts")
		commits[i] = repo.push(h.name, h.files)
	}
	repo.git("-C", repo.work, "rm", "-rq", "rollouts")
	app.Version = v2
	repo.push("fix: v2", map[string]string{file: app.yaml()})

	flags = append(flags, "--strategy-max-files", "100")
	d = startDaemon(t, repo, flags...)
	d.waitStatus(app.Name, 60*time.Second, "the fix applied: canary v2 at 20%", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Weights.Canary == 20 && len(s.Errors) == 0
	})
	for i, h := range hostile {
		a := hook.waitCommit(t, alert.EventStrategyInvalid, commits[i], 10*time.Second)
		if !strings.Contains(a.Reason, h.reason) || !strings.Contains(a.Reason, "previous good version keeps running") {
			t.Errorf("%s (commit %.7s): alert reason %q, want %q and the good version kept", h.name, commits[i], a.Reason, h.reason)
		}
	}
	if got := d.metric(`sluice_revisions_refused_total{reason="limit"}`); got != 1 {
		t.Errorf("sluice_revisions_refused_total{reason=\"limit\"} = %v, want 1 (the too-many-files commit)", got)
	}

	d.stop()
	d = startDaemon(t, repo, flags...)
	st := d.waitStatus(app.Name, 30*time.Second, "canary v2 after a second restart", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Weights.Canary == 20
	})
	if len(st.Errors) != 0 {
		t.Errorf("errors after the second restart: %v", st.Errors)
	}
}

// hostileYAML reads a hostile fixture of the loader's test corpus.
func hostileYAML(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "api", "testdata", "invalid", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// manyFiles is the rollout's file plus n-1 small strategy files beside it.
func manyFiles(file, body string, n int) map[string]string {
	files := map[string]string{file: body}
	for i := 1; i < n; i++ {
		files[fmt.Sprintf("rollouts/many/f%05d.yaml", i)] = "# nothing\n"
	}
	return files
}

// waitCommit returns the first alert of event ev about commit, failing after d.
func (s *sink) waitCommit(t *testing.T, ev alert.Event, commit string, d time.Duration) received {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		for _, a := range s.got {
			if a.Event == ev && a.Commit == commit {
				s.mu.Unlock()
				return a
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s alert for commit %.7s within %v", ev, commit, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the daemon's log holds s.
func (d *daemon) waitLog(s string, timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(d.log.String(), s) {
		if time.Now().After(deadline) {
			d.t.Fatalf("no %s in the log within %v", s, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
