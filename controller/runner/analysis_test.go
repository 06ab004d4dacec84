package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// engineAnalyzer runs the state machine's analysis on the real analysis
// engine, resolving templates from a fixed set (the daemon resolves them
// from the revision in force).
type engineAnalyzer struct {
	engine    *analysis.Engine
	templates map[string]*api.AnalysisTemplate
}

func (a engineAnalyzer) Start(ctx context.Context, run rollout.StartAnalysis, report func(rollout.AnalysisResult)) func() {
	spec := analysis.RunSpec{Name: run.Run, Rollout: run.Rollout, Args: run.Analysis.Args, Builtins: run.Args}
	for _, ref := range run.Analysis.Templates {
		spec.Templates = append(spec.Templates, a.templates[ref.Name])
	}
	return a.engine.Start(ctx, spec, func(s analysis.RunStatus) {
		res := rollout.AnalysisResult{Run: s.Name, Phase: rollout.AnalysisPhase(s.Phase), Message: s.Reason}
		for _, m := range s.Metrics {
			res.Metrics = append(res.Metrics, rollout.MetricStatus{Name: m.Name, Phase: rollout.AnalysisPhase(m.Phase), Value: m.Value, Message: m.Message})
			if s.Phase == analysis.PhaseFailed && m.Phase == analysis.PhaseFailed {
				res.Metric, res.Value = m.Name, m.Value
			}
		}
		report(res)
	})
}

// TestRealAnalysis drives analysis steps and background analysis through
// the real engine measuring a local HTTP endpoint whose success rate
// depends on the version under test: v2 passes and reaches the final
// pause, v3 fails and is aborted with analysis-failed. Closing the runner
// while a background run is measuring must not hang.
func TestRealAnalysis(t *testing.T) {
	rates := map[string]string{"v2": "0.99", "v3": "0.50"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"rate": %s}`, rates[r.URL.Query().Get("version")])
	}))
	t.Cleanup(srv.Close)
	metric := func(name string, interval time.Duration, count int) api.Metric {
		return api.Metric{
			Name: name, Interval: interval, Count: api.IntOrArg{Value: count},
			SuccessCondition:      "result >= 0.95",
			ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
			Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{
				URL: srv.URL + "/rate?version={{args.canary}}", JSONPath: "{$.rate}",
			}},
		}
	}
	engine, err := analysis.New(analysis.Options{WebAllowHosts: []string{"127.0.0.1"}}) // the stats server is on loopback
	if err != nil {
		t.Fatal(err)
	}
	an := engineAnalyzer{engine: engine, templates: map[string]*api.AnalysisTemplate{
		"success-rate": {Key: api.Key{Namespace: "default", Name: "success-rate"}, Metrics: []api.Metric{metric("success-rate", 10*time.Millisecond, 3)}},
		"error-rate":   {Key: api.Key{Namespace: "default", Name: "error-rate"}, Metrics: []api.Metric{metric("error-rate", 20*time.Millisecond, 0)}},
	}}
	e := newEnv(t, envOptions{analyzer: an})
	withBackground := func(r *api.Rollout) *api.Rollout {
		r.Background = &api.BackgroundAnalysis{Analysis: api.Analysis{Templates: []api.TemplateRef{{Name: "error-rate"}}}, StartingStep: 1}
		return r
	}
	steps := []api.Step{setWeight(10), analysisStep("success-rate"), setWeight(40), pause(0)}
	e.do(checkout, rollout.Change{Commit: "1111111", Rollout: withBackground(spec(checkout, "v1", steps...))})
	e.do(checkout, rollout.Change{Commit: "2222222", Rollout: withBackground(spec(checkout, "v2", steps...))})
	s := e.waitState(checkout, "v2 at the final pause", func(s rollout.State) bool { return s.StepIndex == 3 })
	if s.Phase != rollout.PhasePaused || s.Weights != api.CanaryWeights(40) {
		t.Fatalf("v2: %s %+v %s", s.Phase, s.Weights, s.Message)
	}
	st := s.Status()
	if len(st.AnalysisRuns) != 2 || st.AnalysisRuns[1].Phase != rollout.AnalysisSuccessful || st.AnalysisRuns[1].Metrics[0].Value != "0.99" {
		t.Fatalf("analysis runs %+v", st.AnalysisRuns)
	}

	e.do(checkout, rollout.Change{Commit: "3333333", Rollout: withBackground(spec(checkout, "v3", steps...))})
	s = e.waitState(checkout, "v3 aborted", func(s rollout.State) bool { return s.Aborted && s.Settle == nil })
	if s.Phase != rollout.PhaseDegraded || s.Weights != api.CanaryWeights(0) || s.StableVersion != "v1" || !strings.Contains(s.Message, "0.5") {
		t.Fatalf("v3: %s %+v stable %s: %s", s.Phase, s.Weights, s.StableVersion, s.Message)
	}
	// The state is published before its actions run: wait for the push.
	eventually(t, "all traffic back to v1", func() bool {
		tr, _ := e.traffic.last()
		return tr.Weights == api.CanaryWeights(0) && tr.CanaryVersion == "v1" && tr.StableVersion == "v1"
	})
	eventually(t, "analysis-failed alert", func() bool {
		for _, id := range e.hook.ids() {
			if strings.HasPrefix(id, "default/checkout/3333333/analysis-failed/") {
				return true
			}
		}
		return false
	})

	// A new canary whose background run keeps measuring; Close stops it.
	rates["v2"] = "0.99"
	e.do(checkout, rollout.Change{Commit: "4444444", Rollout: withBackground(spec(checkout, "v2", steps...))})
	e.waitState(checkout, "v2 at the final pause again", func(s rollout.State) bool { return s.StepIndex == 3 })
	closed := make(chan struct{})
	go func() {
		e.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung with a background run measuring")
	}
}
