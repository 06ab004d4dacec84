package analysis

import (
	"math"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func mustMetric(t *testing.T, success, failure string) *Metric {
	t.Helper()
	m, err := NewMetric(api.Metric{Name: "m", SuccessCondition: success, FailureCondition: failure}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name             string
		success, failure string
		result           Result
		want             Phase
		wantMsg          string
	}{
		{name: "no conditions", result: Result{Value: 1.0}, want: PhaseSuccessful},
		{name: "success holds", success: "result >= 0.99", result: Result{Value: 0.995}, want: PhaseSuccessful},
		{name: "success fails", success: "result >= 0.99", result: Result{Value: 0.912}, want: PhaseFailed, wantMsg: "0.912 < 0.99"},
		{name: "vector success fails", success: "result[0] >= 0.99", result: Result{Value: []float64{0.912}}, want: PhaseFailed, wantMsg: "0.912 < 0.99"},
		{name: "failure holds", failure: "result > 0.01", result: Result{Value: 0.05}, want: PhaseFailed, wantMsg: "0.05 > 0.01"},
		{name: "failure does not hold", failure: "result > 0.01", result: Result{Value: 0.001}, want: PhaseSuccessful},
		{name: "both, neither holds", success: "result > 0.9", failure: "result < 0.5", result: Result{Value: 0.7}, want: PhaseInconclusive, wantMsg: `0.7: neither "result > 0.9" nor "result < 0.5" holds`},
		{name: "both, failure wins", success: "result > 0.1", failure: "result > 0.5", result: Result{Value: 0.7}, want: PhaseFailed, wantMsg: "0.7 > 0.5"},
		{name: "complex condition", success: "len(result) == 2 && result[1] > 1", result: Result{Value: []float64{1, 0}}, want: PhaseFailed, wantMsg: "[1,0] does not satisfy len(result) == 2 && result[1] > 1"},
		{name: "provider decided", success: "result[0] > 1", result: Result{Phase: PhaseInconclusive, Message: "no data"}, want: PhaseInconclusive, wantMsg: "no data"},
		{name: "runtime error is Error", success: "result[0] > 1", result: Result{Value: []float64{}}, want: PhaseError, wantMsg: `successCondition "result[0] > 1" on []: index out of range: 0 (array length is 0) (column 7)`},
		{name: "NaN fails a plain comparison", success: "result < 1", result: Result{Value: math.NaN()}, want: PhaseFailed, wantMsg: "NaN >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustMetric(t, tt.success, tt.failure)
			got, msg := Evaluate(m, tt.result)
			if got != tt.want || (tt.wantMsg != "" && msg != tt.wantMsg) {
				t.Fatalf("Evaluate = %s %q, want %s %q", got, msg, tt.want, tt.wantMsg)
			}
		})
	}
}
