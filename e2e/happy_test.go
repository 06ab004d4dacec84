package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/analysis/promtest"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

const (
	v1 = "e2e/app:v1"
	v2 = "e2e/app:v2"
)

// The canary steps of the happy path: weight, a header route, a cookie
// route, analysis against Prometheus, and a pause until `sluice promote`.
const happySteps = `- setWeight: 20
- setHeaderRoute:
    name: testers
    match:
    - headerName: x-canary
      headerValue: {exact: always}
- setHeaderRoute:
    name: beta
    match:
    - headerName: cookie
      headerValue: {exact: beta=on}
- analysis:
    templates: [{templateName: prom-success}]
- pause: {}
`

func promTemplate(address string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: prom-success
spec:
  args:
  - name: canary
  metrics:
  - name: success-rate
    initialDelay: 4s
    interval: 2s
    count: 3
    failureLimit: 0
    inconclusiveLimit: 2
    successCondition: len(result) > 0 && result[0] >= 0.95
    provider:
      prometheus:
        address: %s
        query: |
          sum(rate(requests_total{version="{{args.canary}}",code="OK"}[10s]))
          /
          sum(rate(requests_total{version="{{args.canary}}"}[10s]))
`, address)
}

// TestHappyPath is the demo's story through the binary: push v2, watch the
// real clients see 20 % of traffic, the testers header and the beta cookie
// reach v2 (and a different cookie not), Prometheus-backed analysis pass,
// `sluice promote` finish the rollout, and the routes go away.
func TestHappyPath(t *testing.T) {
	t.Parallel()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	prom := promtest.Start(t, promtest.Options{Targets: []string{b1.http, b2.http}})
	repo := newGitRepo(t)
	spec := rolloutSpec{Name: "happy", Host: "happy.e2e", Version: v1,
		Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc}, Steps: happySteps, ManagedRoutes: []string{"testers", "beta"}}
	repo.push("v1", map[string]string{"rollouts/happy.yaml": spec.yaml(), "analysis/prom.yaml": promTemplate(prom.URL)})
	d := startDaemon(t, repo)
	d.waitStatus("happy", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 150, Classes: []probe.Class{
		{Name: "testers", Share: 0.1, Metadata: []string{"x-canary", "always"}},
		{Name: "beta", Share: 0.1, Metadata: []string{"cookie", "session=abc; beta=on"}},
		{Name: "beta-off", Share: 0.1, Metadata: []string{"cookie", "beta=off"}},
	}})
	o := observe(t, lg, 20, "testers", "beta", "beta-off")
	for class, split := range o.Class {
		if split.Share(v1) != 1 {
			t.Fatalf("before the push, %s reached %v", class, split)
		}
	}

	// Both backends are scraped (v2's counters exist at 0 before it gets
	// any traffic), so the analysis only waits for rate() to have samples.
	prom.WaitFor(t, `requests_total{code="OK"}`, 2, 30*time.Second)

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/happy.yaml": spec.yaml()})
	st := d.waitStatus("happy", 60*time.Second, "pause after analysis", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.StepIndex == 4
	})
	if st.Weights.Canary != 20 || len(st.HeaderRoutes) != 2 {
		t.Fatalf("paused with weights %+v and routes %+v", st.Weights, st.HeaderRoutes)
	}
	if len(st.AnalysisRuns) != 1 || st.AnalysisRuns[0].Phase != rollout.AnalysisSuccessful {
		t.Fatalf("analysis runs: %+v", st.AnalysisRuns)
	}
	if m := st.AnalysisRuns[0].Metrics; len(m) != 1 || !strings.HasPrefix(m[0].Value, "1") && !strings.HasPrefix(m[0].Value, "[1") {
		t.Fatalf("prometheus success rate: %+v", m)
	}

	o = observe(t, lg, 60, "testers", "beta", "beta-off")
	def := o.Class[probe.DefaultClass]
	if got := def.Share(v2); math.Abs(got-0.2) > 0.06 {
		t.Errorf("clients observed %.3f on v2 of %d calls; declared 0.20", got, def.Answered())
	}
	for _, class := range []string{"testers", "beta"} {
		if got := o.Class[class]; got.Share(v2) != 1 {
			t.Errorf("%s route: %v, want everything on v2", class, got)
		}
	}
	if off := o.Class["beta-off"]; off.Share(v2) > 0.6 || off.Share(v1) == 0 {
		t.Errorf("a beta=off cookie must follow the weights, got %v", off)
	}

	if got := headerRoutes(routeTable(t, d.xdsAddr, spec.Host)); strings.Join(got, ",") != "testers,beta" {
		t.Errorf("during the canary the xDS route table has header routes %v, want testers, beta", got)
	}

	out := d.cli("promote", "happy")
	if !strings.Contains(out, "happy") {
		t.Errorf("promote said %q", out)
	}
	st = d.waitStatus("happy", 30*time.Second, "promotion", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	if st.CanaryVersion != "" || st.Weights.Stable != 100 || len(st.HeaderRoutes) != 0 {
		t.Fatalf("after promotion: %+v", st)
	}
	o = observe(t, lg, 20, "testers", "beta", "beta-off")
	for class, split := range o.Class {
		if split.Share(v2) != 1 {
			t.Errorf("after promotion %s: %v", class, split)
		}
	}
	// The routes are gone from what clients are served, not only from status.
	if got := headerRoutes(routeTable(t, d.xdsAddr, spec.Host)); len(got) != 0 {
		t.Errorf("after promotion the xDS route table still has header routes %v", got)
	}
	if n := d.metric("sluice_commit_to_traffic_seconds_count"); n < 1 {
		t.Errorf("sluice_commit_to_traffic_seconds_count = %v", n)
	}
}
