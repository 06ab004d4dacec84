package analysis

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// valueServer answers {"v": <value>} with a value the test sets; a
// negative value answers 503.
func valueServer(t *testing.T, v *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := v.Load()
		if n < 0 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"v": %d}`, n)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func webMetric(name, url, success string, interval time.Duration, count int) api.Metric {
	return api.Metric{
		Name: name, Interval: interval, Count: api.IntOrArg{Value: count},
		SuccessCondition:      success,
		ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
		Provider:              api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: url, JSONPath: "{$.v}"}},
	}
}

func TestEngineRuns(t *testing.T) {
	tests := []struct {
		name       string
		value      int64
		spec       RunSpec
		metrics    func(url string) []api.Metric
		want       Phase
		wantReason string
		check      func(t *testing.T, st RunStatus)
	}{
		{
			name: "count measurements then success", value: 1,
			metrics: func(url string) []api.Metric {
				return []api.Metric{webMetric("ok", url, "result == 1", 10*time.Millisecond, 3)}
			},
			want: PhaseSuccessful, wantReason: "all metrics successful",
			check: func(t *testing.T, st RunStatus) {
				if n := len(st.Metrics[0].Measurements); n != 3 {
					t.Errorf("%d measurements, want 3", n)
				}
			},
		},
		{
			name: "failure after failureLimit", value: 0,
			metrics: func(url string) []api.Metric {
				m := webMetric("success-rate", url, "result >= 1", 10*time.Millisecond, 10)
				m.FailureLimit = api.IntOrArg{Value: 2}
				return []api.Metric{m}
			},
			want: PhaseFailed, wantReason: "success-rate: 3 measurements failed, last 0 < 1 (failureLimit 2)",
		},
		{
			name: "error after consecutiveErrorLimit", value: -1,
			metrics: func(url string) []api.Metric {
				return []api.Metric{webMetric("web", url, "result >= 1", 10*time.Millisecond, 0)}
			},
			want: PhaseError,
			check: func(t *testing.T, st RunStatus) {
				m := st.Metrics[0]
				if m.Tally.Error != 5 || !strings.Contains(st.Reason, "5 consecutive errors, last: web response 503 Service Unavailable: down (consecutiveErrorLimit 4)") {
					t.Errorf("tally %+v reason %q", m.Tally, st.Reason)
				}
			},
		},
		{
			name: "dry run never fails the run", value: 0,
			spec: RunSpec{DryRun: []string{"dry"}},
			metrics: func(url string) []api.Metric {
				return []api.Metric{webMetric("dry", url, "result >= 1", 10*time.Millisecond, 2), webMetric("real", url, "result == 0", 10*time.Millisecond, 2)}
			},
			want: PhaseSuccessful, wantReason: "all metrics successful (dry-run: dry Failed)",
			check: func(t *testing.T, st RunStatus) {
				if m := st.Metrics[0]; !m.DryRun || m.Phase != PhaseFailed {
					t.Errorf("dry metric = %+v", m)
				}
			},
		},
		{
			name: "unsupported provider", value: 1,
			metrics: func(url string) []api.Metric {
				return []api.Metric{
					webMetric("ok", url, "result == 1", time.Hour, 0),
					{Name: "dd", Provider: api.Provider{Kind: "datadog", Unsupported: true}},
				}
			},
			want: PhaseError, wantReason: "dd: provider datadog is not implemented by sluice",
		},
		{
			name: "measurement retention", value: 1,
			spec: RunSpec{MeasurementRetention: map[string]int{"ok": 2}},
			metrics: func(url string) []api.Metric {
				return []api.Metric{webMetric("ok", url, "result == 1", time.Millisecond, 5)}
			},
			want: PhaseSuccessful,
			check: func(t *testing.T, st RunStatus) {
				m := st.Metrics[0]
				if len(m.Measurements) != 2 || m.Tally.Count != 5 {
					t.Errorf("kept %d measurements, tally %+v", len(m.Measurements), m.Tally)
				}
			},
		},
		{
			name: "failing metric terminates an unbounded one", value: 0,
			metrics: func(url string) []api.Metric {
				return []api.Metric{webMetric("background", url, "result == 0", time.Millisecond, 0), webMetric("gate", url, "result == 1", 50*time.Millisecond, 0)}
			},
			want: PhaseFailed, wantReason: "gate: 0 != 1 (failureLimit 0)",
			check: func(t *testing.T, st RunStatus) {
				if m := st.Metrics[0]; m.Phase != PhaseSuccessful {
					t.Errorf("background metric = %s, want Successful (terminated)", m.Phase)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v atomic.Int64
			v.Store(tt.value)
			url := valueServer(t, &v)
			e, reg := newTestEngine(t)
			rec := startRun(t, e, tt.spec, tt.metrics(url)...)
			st := rec.wait(t, 30*time.Second)
			if st.Phase != tt.want || (tt.wantReason != "" && st.Reason != tt.wantReason) {
				t.Fatalf("run = %s %q, want %s %q", st.Phase, st.Reason, tt.want, tt.wantReason)
			}
			if tt.check != nil {
				tt.check(t, st)
			}
			if n := gathered(t, reg, "sluice_analysis_runs_total", map[string]string{"namespace": "default", "name": "checkout", "phase": string(tt.want)}); n != 1 {
				t.Errorf("sluice_analysis_runs_total{phase=%s} = %v", tt.want, n)
			}
		})
	}
}

func TestEngineStop(t *testing.T) {
	var v atomic.Int64
	v.Store(7)
	url := valueServer(t, &v)
	e, reg := newTestEngine(t)
	rec := newRecorder()
	stop := e.Start(context.Background(), RunSpec{Name: "bg", Rollout: api.Key{Namespace: "shop", Name: "checkout"}, Templates: []*api.AnalysisTemplate{{
		Metrics: []api.Metric{webMetric("latency", url, "result < 10", 5*time.Millisecond, 0)},
	}}}, rec.report)
	deadline := time.Now().Add(20 * time.Second)
	for len(rec.all()) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("no measurements reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	n := len(rec.all())
	stop() // idempotent
	time.Sleep(30 * time.Millisecond)
	if got := len(rec.all()); got != n {
		t.Fatalf("%d reports after stop", got-n)
	}
	last := rec.all()[n-1]
	if last.Phase != PhaseRunning || last.Metrics[0].Value != "7" {
		t.Fatalf("last report = %+v", last)
	}
	if got := gathered(t, reg, "sluice_analysis_metric_value", map[string]string{"namespace": "shop", "name": "checkout", "metric": "latency"}); got != 7 {
		t.Fatalf("sluice_analysis_metric_value = %v, want 7", got)
	}
}

func TestEngineInitialDelayAndPlanError(t *testing.T) {
	var v atomic.Int64
	v.Store(1)
	url := valueServer(t, &v)
	tests := []struct {
		name       string
		metric     api.Metric
		want       Phase
		wantReason string
		minElapsed time.Duration
	}{
		{
			name: "initial delay is waited",
			metric: func() api.Metric {
				m := webMetric("delayed", url, "result == 1", 0, 1)
				m.InitialDelay = 300 * time.Millisecond
				return m
			}(),
			want: PhaseSuccessful, minElapsed: 300 * time.Millisecond,
		},
		{
			name:   "unresolvable args end the run in Error",
			metric: webMetric("m", url+"/{{args.nope}}", "result == 1", 0, 1),
			want:   PhaseError, wantReason: "metric m: provider: unknown arg nope",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newTestEngine(t)
			start := time.Now()
			st := startRun(t, e, RunSpec{}, tt.metric).wait(t, 30*time.Second)
			if st.Phase != tt.want || (tt.wantReason != "" && st.Reason != tt.wantReason) {
				t.Fatalf("run = %s %q, want %s %q", st.Phase, st.Reason, tt.want, tt.wantReason)
			}
			if tt.minElapsed > 0 && st.Metrics[0].Measurements[0].StartedAt.Sub(start) < tt.minElapsed {
				t.Fatalf("first measurement %s after start, want at least %s", st.Metrics[0].Measurements[0].StartedAt.Sub(start), tt.minElapsed)
			}
		})
	}
}
