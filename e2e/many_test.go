package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestManyRollouts: 20 rollouts in one repository start their canaries in
// one commit; one of them fails its analysis and rolls back, the other 19
// complete, and the clients of one of each kind see the outcome.
func TestManyRollouts(t *testing.T) {
	t.Parallel()
	const n, failing = 20, 7
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	stats := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rate := "1"
		if r.URL.Path == "/bad" {
			rate = "0.5"
		}
		fmt.Fprintf(w, `{"successRate": %s}`, rate)
	}))
	t.Cleanup(stats.Close)
	name := func(i int) string { return fmt.Sprintf("svc-%02d", i) }
	specs := make([]rolloutSpec, n)
	files := map[string]string{
		"analysis/ok.yaml":  webTemplate("ok", stats.URL+"/ok"),
		"analysis/bad.yaml": webTemplate("bad", stats.URL+"/bad"),
	}
	for i := range specs {
		tmpl := "ok"
		if i == failing {
			tmpl = "bad"
		}
		specs[i] = rolloutSpec{Name: name(i), Host: name(i) + ".e2e", Version: v1, Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc},
			Steps: fmt.Sprintf("- setWeight: 20\n- analysis:\n    templates: [{templateName: %s}]\n- setWeight: 60\n- pause: {duration: 1s}\n", tmpl)}
		files["rollouts/"+name(i)+".yaml"] = specs[i].yaml()
	}
	repo := newGitRepo(t)
	repo.push("twenty services at v1", files)
	d := startDaemon(t, repo)
	waitAll(t, d, n, 60*time.Second, "all stable on v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	good := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: specs[0].Host, Clients: 1, Rate: 50, NodePrefix: "good"})
	bad := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: specs[failing].Host, Clients: 1, Rate: 50, NodePrefix: "bad"})

	files = map[string]string{}
	for i := range specs {
		specs[i].Version = v2
		files["rollouts/"+name(i)+".yaml"] = specs[i].yaml()
	}
	commit := repo.push("twenty services to v2", files)
	final := waitAll(t, d, n, 120*time.Second, "every rollout settled", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && (s.Phase == rollout.PhaseHealthy && s.StableVersion == v2 || s.Phase == rollout.PhaseDegraded)
	})
	for _, s := range final {
		if s.Name == name(failing) {
			if !s.Aborted || s.StableVersion != v1 || s.Weights.Stable != 100 {
				t.Errorf("%s should have rolled back: %+v", s.Name, s)
			}
			continue
		}
		if s.Phase != rollout.PhaseHealthy || s.StableVersion != v2 {
			t.Errorf("%s did not complete: %s %q", s.Name, s.Phase, s.Message)
		}
	}
	if got := observe(t, good, 10).Class[probe.DefaultClass]; got.Share(v2) != 1 {
		t.Errorf("clients of %s: %v", specs[0].Name, got)
	}
	if got := observe(t, bad, 10).Class[probe.DefaultClass]; got.Share(v1) != 1 {
		t.Errorf("clients of %s: %v", specs[failing].Name, got)
	}
}

// waitAll polls the rollout list until n rollouts exist and all satisfy
// cond, and returns them.
func waitAll(t *testing.T, d *daemon, n int, timeout time.Duration, what string, cond func(httpapi.RolloutStatus) bool) []httpapi.RolloutStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var pending []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		items, err := d.api.List(ctx)
		cancel()
		if err == nil && len(items) == n {
			pending = pending[:0]
			for _, s := range items {
				if !cond(s) {
					pending = append(pending, fmt.Sprintf("%s: %s %q", s.Name, s.Phase, s.Message))
				}
			}
			if len(pending) == 0 {
				return items
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (%d rollouts listed, err %v); pending: %v", what, timeout, len(items), err, pending)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
