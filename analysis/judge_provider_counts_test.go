package analysis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// countJudgeMetric judges errors of canary against baseline as counts, on
// the exporter of prometheus_test.go (v1, v2: no errors; bad: half 500).
func countJudgeMetric(address, canary, baseline string, mode api.JudgeMode) api.Metric {
	q := func(v, code string) string {
		return fmt.Sprintf(`sum(increase(http_requests_total{version=%q,code=~%q}[1s]))`, v, code)
	}
	return api.Metric{
		Name:                  "errors",
		ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
		Provider: api.Provider{Kind: api.ProviderJudge, Judge: &api.JudgeProvider{
			Address:           address,
			CanaryErrorsQuery: q(canary, "5.."), CanaryTotalQuery: q(canary, ".*"),
			BaselineErrorsQuery: q(baseline, "5.."), BaselineTotalQuery: q(baseline, ".*"),
			Lookback: 3 * time.Second, Step: time.Second, Direction: api.DirectionIncrease,
			Mode: mode, Critical: true,
		}},
	}
}

func TestJudgeProviderCounts(t *testing.T) {
	p := startTrafficPrometheus(t)
	p.WaitFor(t, `count_over_time(http_requests_total{version="v1",code="200"}[4s]) > 7`, 1, 60*time.Second)
	tests := []struct {
		name       string
		metric     api.Metric
		want       Phase
		wantReason string
		maxTime    time.Duration // how long the measurement may take
	}{
		{name: "fixed: failing canary fails, explained in errors", metric: countJudgeMetric(p.URL, "bad", "v1", api.JudgeFixed),
			want: PhaseFailed, wantReason: "errors: 0 < 75; canary 50 % errors", maxTime: 2 * time.Second},
		{name: "fixed: healthy canary passes", metric: countJudgeMetric(p.URL, "v2", "v1", api.JudgeFixed),
			want: PhaseSuccessful, maxTime: 2 * time.Second},
		{name: "fixed: no canary traffic is inconclusive", metric: countJudgeMetric(p.URL, "absent", "v1", api.JudgeFixed),
			want: PhaseInconclusive, wantReason: "no traffic: canary 0", maxTime: 2 * time.Second},
		{name: "sequential: failing canary fails at the first step", metric: countJudgeMetric(p.URL, "bad", "v1", api.JudgeSequential),
			want: PhaseFailed, wantReason: "after 1 of 3 steps, failed", maxTime: 2500 * time.Millisecond},
		{name: "sequential: no evidence either way is inconclusive at the window's end", metric: countJudgeMetric(p.URL, "v2", "v1", api.JudgeSequential),
			want: PhaseInconclusive, wantReason: "undecided so far at the end of the window (lookback 3s)", maxTime: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := newTestEngine(t)
			rec := startRun(t, e, RunSpec{}, tt.metric)
			st := rec.wait(t, 60*time.Second)
			if st.Phase != tt.want || !strings.Contains(st.Reason, tt.wantReason) {
				t.Fatalf("run = %s %q, want %s containing %q; metrics %+v", st.Phase, st.Reason, tt.want, tt.wantReason, st.Metrics)
			}
			m := st.Metrics[0].Measurements[0]
			if took := m.FinishedAt.Sub(m.StartedAt); took > tt.maxTime {
				t.Errorf("the measurement took %s, want at most %s", took, tt.maxTime)
			}
		})
	}
}
