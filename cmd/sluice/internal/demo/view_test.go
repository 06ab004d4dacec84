package demo

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/testkit"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// scene is a demo run in frames: the stable version, the push, a canary
// at 10 % with the testers route and a running analysis, a failed
// analysis, and the rollback with its alerts.
func scene() []Frame {
	status := func(phase rollout.Phase, msg string, canary int32, mod func(*httpapi.RolloutStatus)) *httpapi.RolloutStatus {
		s := &httpapi.RolloutStatus{
			Namespace: Namespace, Name: RolloutName, Phase: phase, Message: msg,
			Commit: "9f8d1117c0ffee", StableVersion: StableVersion, CanaryVersion: CanaryVersion,
			StepCount: 6, Weights: api.CanaryWeights(canary),
		}
		if mod != nil {
			mod(s)
		}
		return s
	}
	observed := func(v1, v2, testers int, failed int) probe.Observation {
		o := probe.Observation{Window: 5 * time.Second, Rate: 200, Class: map[string]probe.Split{
			probe.DefaultClass: {StableVersion: {OK: v1}, CanaryVersion: {OK: v2 - failed, Failed: failed}},
		}}
		if testers > 0 {
			o.Class[TestersClass] = probe.Split{CanaryVersion: {OK: testers}}
		}
		return o
	}
	ev := func(seq uint64, sec int, typ, msg string) httpapi.Event {
		return httpapi.Event{Seq: seq, Time: t0.Add(time.Duration(sec) * time.Second), Namespace: Namespace, Name: RolloutName, Type: typ, Message: msg}
	}
	run := func(phase rollout.AnalysisPhase, value, msg string) []rollout.RunStatus {
		return []rollout.RunStatus{{Name: "success-rate-3", Phase: phase, Metrics: []rollout.MetricStatus{{Name: "success-rate", Phase: phase, Value: value, Message: msg}}}}
	}
	healthy := status(rollout.PhaseHealthy, "stable demo/app:v1 at 100%", 0, func(s *httpapi.RolloutStatus) { s.CanaryVersion = "" })
	e1 := ev(1, 12, "rollout-started", "canary demo/app:v2 from commit 9f8d111")
	e2 := ev(2, 12, "step-completed", "step 1/6: setWeight 10")
	e3 := ev(3, 13, "step-completed", "step 2/6: header route testers")
	e4 := ev(4, 16, "analysis-failed", "analysis success-rate failed: result 0.8 < 0.95")
	e5 := ev(5, 16, "rollout-aborted", "analysis success-rate failed")
	aborted := alert.Alert{ID: "default/demo/9f8d111/aborted", Event: alert.EventRolloutAborted, Severity: alert.SeverityError,
		Rollout: "default/demo", Version: CanaryVersion, Reason: "analysis success-rate failed: result 0.8 < 0.95"}
	failedA := aborted
	failedA.ID, failedA.Event = "default/demo/9f8d111/analysis-failed", alert.EventAnalysisFailed
	return []Frame{
		{Elapsed: 900 * time.Millisecond, Stage: "starting the daemon"},
		{Elapsed: 3 * time.Second, Stage: "sending 200 requests/s", Status: healthy, Observed: observed(600, 0, 0, 0)},
		{Elapsed: 4 * time.Second, Stage: "pushed demo/app:v2 (commit 9f8d111)", Status: healthy, Observed: observed(800, 0, 0, 0)},
		{Elapsed: 5 * time.Second, Stage: "pushed demo/app:v2 (commit 9f8d111)", Observed: observed(720, 80, 90, 0), Events: []httpapi.Event{e1, e2, e3},
			Status: status(rollout.PhaseProgressing, "step 3/6: analysis success-rate", 10, func(s *httpapi.RolloutStatus) {
				s.StepIndex = 2
				s.HeaderRoutes = []api.HeaderRoute{{Name: "testers"}}
				s.AnalysisRuns = run(rollout.AnalysisRunning, "", "")
			})},
		{Elapsed: 7 * time.Second, Stage: "pushed demo/app:v2 (commit 9f8d111)", Observed: observed(718, 82, 95, 16), Events: []httpapi.Event{e1, e2, e3},
			Status: status(rollout.PhaseProgressing, "step 3/6: analysis success-rate", 10, func(s *httpapi.RolloutStatus) {
				s.StepIndex = 2
				s.AnalysisRuns = run(rollout.AnalysisRunning, "0.8", "")
			})},
		{Elapsed: 9500 * time.Millisecond, Stage: "pushed demo/app:v2 (commit 9f8d111)", Observed: observed(760, 40, 40, 8),
			Events: []httpapi.Event{e1, e2, e3, e4, e5},
			Alerts: []Received{{Alert: failedA, At: t0.Add(16 * time.Second)}, {Alert: aborted, At: t0.Add(16 * time.Second)}},
			Status: status(rollout.PhaseDegraded, "aborted at step 3/6: analysis success-rate failed: result 0.8 < 0.95", 0, func(s *httpapi.RolloutStatus) {
				s.StepIndex, s.Aborted = 2, true
				s.AnalysisRuns = run(rollout.AnalysisFailed, "0.8", "result 0.8 < 0.95")
			})},
		{Elapsed: 16 * time.Second, Stage: "pushed demo/app:v2 (commit 9f8d111)", Observed: observed(800, 0, 0, 0),
			Events: []httpapi.Event{e1, e2, e3, e4, e5},
			Alerts: []Received{{Alert: failedA, At: t0.Add(16 * time.Second)}, {Alert: aborted, At: t0.Add(16 * time.Second)}},
			Status: status(rollout.PhaseDegraded, "aborted at step 3/6: analysis success-rate failed: result 0.8 < 0.95", 0, func(s *httpapi.RolloutStatus) {
				s.StepIndex, s.Aborted = 2, true
				s.AnalysisRuns = run(rollout.AnalysisFailed, "0.8", "result 0.8 < 0.95")
			})},
	}
}

func TestRender(t *testing.T) {
	frames := scene()
	tests := []struct {
		name  string
		frame Frame
	}{
		{"render-starting", frames[0]},
		{"render-canary", frames[3]},
		{"render-aborted", frames[5]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			Render(&b, tt.frame)
			testkit.Golden(t, filepath.Join("testdata", tt.name+".golden"), b.Bytes())
		})
	}
}

func TestLive(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
	}{
		{"live-plain", Lines},
		{"live-tty", Terminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			l := NewLive(&b, tt.mode)
			for _, f := range scene() {
				if err := l.Draw(f); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			out := b.Bytes()
			if tt.mode == Terminal {
				// Escapes made visible, so the golden diff is readable.
				out = []byte(strings.ReplaceAll(string(out), "\x1b", "<ESC>"))
			} else if bytes.Contains(out, []byte("\x1b")) {
				t.Fatal("plain output contains terminal escapes")
			}
			testkit.Golden(t, filepath.Join("testdata", tt.name+".golden"), out)
		})
	}
}

func TestSummary(t *testing.T) {
	rec := NewRecorder()
	frames := scene()
	for i, f := range frames {
		if i == 2 {
			rec.Pushed(t0.Add(11 * time.Second))
		}
		rec.Observe(f)
	}
	s := rec.Summary()
	s.Commit, s.Tool = "9f8d1117c0ffee", "git"
	s.PushToCanary, s.PushToEnd = 84*time.Millisecond, 12*time.Second
	s.Alerts = frames[len(frames)-1].Alerts
	if len(s.Steps) != 5 || s.Phase != "Degraded" || len(s.Runs) != 1 || s.Runs[0].Phase != rollout.AnalysisFailed {
		t.Fatalf("recorded %+v", s)
	}
	var b bytes.Buffer
	WriteSummary(&b, s)
	testkit.Golden(t, filepath.Join("testdata", "summary-aborted.golden"), b.Bytes())
}
