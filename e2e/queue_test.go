package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestMaxConcurrentCanaries: with --max-concurrent-canaries 1, one commit
// changes two rollouts; the first starts, the second waits "Queued (1
// ahead)" with its clients all on stable, stays queued across a restart of
// the daemon, and starts once the first is promoted.
func TestMaxConcurrentCanaries(t *testing.T) {
	t.Parallel()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	specs := []rolloutSpec{
		{Name: "alpha", Host: "alpha.e2e"},
		{Name: "beta", Host: "beta.e2e"},
	}
	files := func(version string) map[string]string {
		out := map[string]string{}
		for _, s := range specs {
			s.Version = version
			s.Endpoints = map[string]string{v1: b1.grpc, v2: b2.grpc}
			s.Steps = "- setWeight: 20\n- pause: {}\n"
			out["rollouts/"+s.Name+".yaml"] = s.yaml()
		}
		return out
	}
	repo := newGitRepo(t)
	repo.push("alpha and beta at v1", files(v1))
	flags := []string{"--state-dir", t.TempDir(), "--max-concurrent-canaries", "1"}
	d := startDaemon(t, repo, flags...)
	for _, s := range specs {
		d.waitStatus(s.Name, 30*time.Second, "stable v1", func(st httpapi.RolloutStatus) bool {
			return st.Phase == rollout.PhaseHealthy && st.StableVersion == v1
		})
	}
	commit := repo.push("alpha and beta to v2", files(v2))

	queued := func(d *daemon) {
		t.Helper()
		d.waitStatus("alpha", 30*time.Second, "alpha's canary at 20%", func(st httpapi.RolloutStatus) bool {
			return st.Commit == commit && st.Phase == rollout.PhasePaused && st.CanaryVersion == v2 && st.Weights.Canary == 20
		})
		st := d.waitStatus("beta", 30*time.Second, "beta queued", func(st httpapi.RolloutStatus) bool { return st.Queued != nil })
		if !strings.HasPrefix(st.Message, "Queued (1 ahead): canary "+v2) || st.Queued.Ahead != 1 || st.Queued.Position != 1 || st.Queued.Commit != commit {
			t.Fatalf("beta: message %q, queued %+v", st.Message, st.Queued)
		}
		if st.Phase != rollout.PhaseProgressing || st.CanaryVersion != "" || st.Weights.Stable != 100 || st.StableVersion != v1 {
			t.Fatalf("beta queued: phase %s canary %q weights %+v stable %s", st.Phase, st.CanaryVersion, st.Weights, st.StableVersion)
		}
		// Its real clients see stable only.
		lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: "beta.e2e", Clients: 1, Rate: 100})
		if got := observe(t, lg, 10).Class[probe.DefaultClass]; got.Share(v1) != 1 {
			t.Fatalf("clients of queued beta: %v", got)
		}
	}
	queued(d)
	if out := d.cli("get", "rollouts"); !strings.Contains(out, "Queued (1 ahead)") {
		t.Errorf("sluice get rollouts does not show the queue:\n%s", out)
	}

	// A restart keeps beta queued behind alpha.
	d.stop()
	d = startDaemon(t, repo, flags...)
	queued(d)

	d.cli("promote", "alpha", "--full")
	d.waitStatus("alpha", 30*time.Second, "alpha promoted", func(st httpapi.RolloutStatus) bool {
		return st.Phase == rollout.PhaseHealthy && st.StableVersion == v2
	})
	st := d.waitStatus("beta", 30*time.Second, "beta's canary at 20%", func(st httpapi.RolloutStatus) bool {
		return st.Phase == rollout.PhasePaused && st.CanaryVersion == v2 && st.Weights.Canary == 20
	})
	if st.Queued != nil || st.Commit != commit {
		t.Errorf("beta started from commit %s, queued %+v", st.Commit, st.Queued)
	}
}
