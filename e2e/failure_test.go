package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/alert/amtest"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestFailureRollsBack: v2 fails 30 % of its requests; the web analysis
// reading v2's own counters fails, sluice aborts on its own, the clients
// see all traffic (testers included) back on v1, and the alert reaches a
// webhook sink, a real Alertmanager and the SSE stream, with the reason.
func TestFailureRollsBack(t *testing.T) {
	t.Parallel()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0.3)
	am := amtest.Start(t)
	hook := startSink(t)
	repo := newGitRepo(t)
	spec := rolloutSpec{Name: "failing", Host: "failing.e2e", Version: v1,
		Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc}, ManagedRoutes: []string{"testers"},
		Steps: `- setWeight: 20
- setHeaderRoute:
    name: testers
    match:
    - headerName: x-canary
      headerValue: {exact: always}
- analysis:
    templates: [{templateName: web-success}]
- setWeight: 60
- pause: {}
`}
	repo.push("v1", map[string]string{
		"rollouts/failing.yaml": spec.yaml(),
		"analysis/web.yaml":     webTemplate("web-success", "http://"+b2.http+"/stats"),
	})
	d := startDaemon(t, repo, "--alert-webhook", hook.srv.URL, "--alertmanager-url", am.URL)
	events := openSSE(t, d)
	d.waitStatus("failing", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 150,
		Classes: []probe.Class{{Name: "testers", Share: 0.1, Metadata: []string{"x-canary", "always"}}}})
	if _, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v1); err != nil {
		t.Fatal(err)
	}

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/failing.yaml": spec.yaml()})
	if _, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v2); err != nil {
		t.Fatal(err)
	}
	st := d.waitStatus("failing", 60*time.Second, "abort", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Aborted && s.Phase == rollout.PhaseDegraded
	})
	abortSeen := time.Now()
	if st.Phase != rollout.PhaseDegraded || st.Weights.Canary != 0 || st.Weights.Stable != 100 || len(st.HeaderRoutes) != 0 {
		t.Fatalf("after the abort: %+v", st)
	}
	if !strings.Contains(st.Message, "success-rate") {
		t.Errorf("status message %q does not name the failed metric", st.Message)
	}

	rollout := "default/failing"
	aborted := hook.wait(t, alert.EventRolloutAborted, rollout, 10*time.Second)
	if lag := aborted.at.Sub(abortSeen); lag > 2*time.Second {
		t.Errorf("webhook got rollout-aborted %v after the status showed it", lag)
	}
	failed := hook.wait(t, alert.EventAnalysisFailed, rollout, 10*time.Second)
	for _, a := range []received{aborted, failed} {
		if !strings.Contains(a.Reason, "success-rate") || a.Version != v2 || a.Commit != commit {
			t.Errorf("%s alert: %+v", a.Event, a.Alert)
		}
	}
	if failed.Metric != "success-rate" || failed.Value == "" {
		t.Errorf("analysis-failed alert lacks metric and value: %+v", failed.Alert)
	}
	if aborted.Weights.Canary != 0 {
		t.Errorf("rollout-aborted alert weights %+v", aborted.Weights)
	}
	inAM := am.WaitFor(t, map[string]string{"alertname": "rollout-aborted", "rollout": rollout, "namespace": "default", "severity": "error"}, 15*time.Second)
	if !strings.Contains(inAM.Annotations["reason"], "success-rate") {
		t.Errorf("alertmanager alert reason %q", inAM.Annotations["reason"])
	}
	ev := events.wait(t, "failing", "rollout-aborted", 10*time.Second)
	if !strings.Contains(ev.Message, "success-rate") {
		t.Errorf("SSE rollout-aborted message %q", ev.Message)
	}

	// What the clients see from now on: v1 only, testers included (the
	// header route is gone).
	o := observe(t, lg, 30, "testers")
	for class, split := range o.Class {
		if split.Share(v1) != 1 {
			t.Errorf("after the rollback %s reached %v", class, split)
		}
	}
}

// TestAbortCommand: `sluice abort` during a pause puts all traffic back on
// stable and the alert reaches the webhook sink within 2 s.
func TestAbortCommand(t *testing.T) {
	t.Parallel()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	hook := startSink(t)
	repo := newGitRepo(t)
	spec := rolloutSpec{Name: "stopme", Host: "stopme.e2e", Version: v1,
		Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc}, Steps: "- setWeight: 30\n- pause: {}\n"}
	repo.push("v1", map[string]string{"stopme.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--alert-webhook", hook.srv.URL)
	d.waitStatus("stopme", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 1, Rate: 100})

	spec.Version = v2
	repo.push("v2", map[string]string{"stopme.yaml": spec.yaml()})
	d.waitStatus("stopme", 30*time.Second, "pause at 30%", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.Weights.Canary == 30
	})
	if o := observe(t, lg, 30); o.Class[probe.DefaultClass].Share(v2) == 0 {
		t.Fatalf("no canary traffic at 30%%: %v", o.Class)
	}

	sent := time.Now()
	d.cli("abort", "stopme")
	got := hook.wait(t, alert.EventRolloutAborted, "default/stopme", 2*time.Second)
	t.Logf("abort command to alert at the sink: %v", got.at.Sub(sent))
	st := d.waitStatus("stopme", 30*time.Second, "abort settled", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseDegraded })
	if !st.Aborted || st.Weights.Stable != 100 {
		t.Fatalf("after sluice abort: %+v", st)
	}
	if o := observe(t, lg, 30); o.Class[probe.DefaultClass].Share(v1) != 1 {
		t.Errorf("after sluice abort clients saw %v", o.Class)
	}
}
