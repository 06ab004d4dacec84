package analysis

import (
	"testing"
)

// measure builds measurements from phase letters: S F I E.
func measure(seq string) (Tally, []Measurement) {
	var t Tally
	var ms []Measurement
	for _, c := range seq {
		m := Measurement{}
		switch c {
		case 'S':
			m = Measurement{Phase: PhaseSuccessful, Value: "0.999"}
		case 'F':
			m = Measurement{Phase: PhaseFailed, Value: "0.912", Message: "0.912 < 0.99"}
		case 'I':
			m = Measurement{Phase: PhaseInconclusive, Message: "no data"}
		case 'E':
			m = Measurement{Phase: PhaseError, Message: "connection refused"}
		}
		t.Add(m.Phase)
		ms = append(ms, m)
	}
	return t, ms
}

func TestAssess(t *testing.T) {
	base := Metric{Name: "success-rate", ConsecutiveErrorLimit: 4}
	with := func(f func(m *Metric)) Metric { m := base; f(&m); return m }
	tests := []struct {
		name        string
		metric      Metric
		seq         string
		terminating bool
		want        Phase
		wantMsg     string
	}{
		{name: "no measurement yet", metric: base, seq: "", want: PhasePending},
		{name: "no measurement, terminating", metric: base, seq: "", terminating: true, want: PhaseSuccessful},
		{name: "unbounded keeps running", metric: base, seq: "SSS", want: PhaseRunning},
		{name: "unbounded ends successful when terminating", metric: base, seq: "SS", terminating: true, want: PhaseSuccessful, wantMsg: "2 of 2 measurements successful, last 0.999"},
		{name: "failureLimit 0 fails at once", metric: base, seq: "F", want: PhaseFailed, wantMsg: "0.912 < 0.99 (failureLimit 0)"},
		{name: "failureLimit 2 tolerates two", metric: with(func(m *Metric) { m.FailureLimit = 2 }), seq: "FSF", want: PhaseRunning},
		{name: "failureLimit 2 fails on third", metric: with(func(m *Metric) { m.FailureLimit = 2 }), seq: "FSFF", want: PhaseFailed, wantMsg: "3 measurements failed, last 0.912 < 0.99 (failureLimit 2)"},
		{name: "failureLimit -1 never fails", metric: with(func(m *Metric) { m.FailureLimit = -1; m.Count = 3 }), seq: "FFF", want: PhaseSuccessful},
		{name: "inconclusive on no data", metric: base, seq: "I", want: PhaseInconclusive, wantMsg: "no data (inconclusiveLimit 0)"},
		{name: "inconclusiveLimit tolerates", metric: with(func(m *Metric) { m.InconclusiveLimit = 1 }), seq: "IS", want: PhaseRunning},
		{name: "four errors keep running", metric: base, seq: "EEEE", want: PhaseRunning},
		{name: "fifth consecutive error is Error", metric: base, seq: "EEEEE", want: PhaseError, wantMsg: "5 consecutive errors, last: connection refused (consecutiveErrorLimit 4)"},
		{name: "success resets the error streak", metric: base, seq: "EEEESEEEE", want: PhaseRunning},
		{name: "consecutiveErrorLimit 0", metric: with(func(m *Metric) { m.ConsecutiveErrorLimit = 0 }), seq: "E", want: PhaseError},
		{name: "errors do not count towards count", metric: with(func(m *Metric) { m.Count = 2 }), seq: "SE", want: PhaseRunning},
		{name: "count reached", metric: with(func(m *Metric) { m.Count = 2; m.FailureLimit = 1 }), seq: "FS", want: PhaseSuccessful, wantMsg: "1 of 2 measurements successful, last 0.999"},
		{name: "consecutiveSuccessLimit reached", metric: with(func(m *Metric) { m.ConsecutiveSuccessLimit = 2; m.FailureLimit = 5 }), seq: "FSS", want: PhaseSuccessful, wantMsg: "2 consecutive successes (consecutiveSuccessLimit 2)"},
		{name: "count without success streak is Inconclusive", metric: with(func(m *Metric) { m.Count = 3; m.ConsecutiveSuccessLimit = 2; m.FailureLimit = 5 }), seq: "SFS", want: PhaseInconclusive},
		{name: "count without success streak and no failureLimit fails", metric: with(func(m *Metric) { m.Count = 3; m.ConsecutiveSuccessLimit = 2; m.FailureLimit = -1 }), seq: "SFS", want: PhaseFailed},
		{name: "critical judge fails at once", metric: with(func(m *Metric) { m.critical = true; m.FailureLimit = 3 }), seq: "SF", want: PhaseFailed, wantMsg: "0.912 < 0.99 (critical)"},
		{name: "error overrides failure", metric: with(func(m *Metric) { m.ConsecutiveErrorLimit = 0 }), seq: "FE", want: PhaseError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tally, ms := measure(tt.seq)
			got, msg := Assess(&tt.metric, tally, ms, tt.terminating)
			if got != tt.want || (tt.wantMsg != "" && msg != tt.wantMsg) {
				t.Fatalf("Assess(%s) = %s %q, want %s %q", tt.seq, got, msg, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestRunPhase(t *testing.T) {
	ok := MetricStatus{Name: "a", Phase: PhaseSuccessful}
	running := MetricStatus{Name: "b", Phase: PhaseRunning}
	failed := MetricStatus{Name: "success-rate", Phase: PhaseFailed, Message: "0.912 < 0.99 (failureLimit 0)"}
	inconclusive := MetricStatus{Name: "latency", Phase: PhaseInconclusive, Message: "no data (inconclusiveLimit 0)"}
	errored := MetricStatus{Name: "web", Phase: PhaseError, Message: "provider datadog is not implemented by sluice"}
	dryFailed := MetricStatus{Name: "dry", Phase: PhaseFailed, DryRun: true, Message: "x"}
	dryRunning := MetricStatus{Name: "dry", Phase: PhaseRunning, DryRun: true}
	tests := []struct {
		name       string
		metrics    []MetricStatus
		want       Phase
		wantReason string
	}{
		{name: "all successful", metrics: []MetricStatus{ok, ok}, want: PhaseSuccessful, wantReason: "all metrics successful"},
		{name: "still running", metrics: []MetricStatus{ok, running}, want: PhaseRunning},
		{name: "failure ends the run", metrics: []MetricStatus{running, failed}, want: PhaseFailed, wantReason: "success-rate: 0.912 < 0.99 (failureLimit 0)"},
		{name: "failed is worse than error and inconclusive", metrics: []MetricStatus{inconclusive, errored, failed}, want: PhaseFailed, wantReason: "success-rate: 0.912 < 0.99 (failureLimit 0)"},
		{name: "error is worse than inconclusive", metrics: []MetricStatus{inconclusive, errored}, want: PhaseError, wantReason: "web: provider datadog is not implemented by sluice"},
		{name: "inconclusive", metrics: []MetricStatus{ok, inconclusive}, want: PhaseInconclusive, wantReason: "latency: no data (inconclusiveLimit 0)"},
		{name: "dry run never fails", metrics: []MetricStatus{ok, dryFailed}, want: PhaseSuccessful, wantReason: "all metrics successful (dry-run: dry Failed)"},
		{name: "dry run metric still measuring", metrics: []MetricStatus{ok, dryRunning}, want: PhaseRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := RunPhase(tt.metrics)
			if got != tt.want || reason != tt.wantReason {
				t.Fatalf("RunPhase = %s %q, want %s %q", got, reason, tt.want, tt.wantReason)
			}
		})
	}
}
