package analysis

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestVerdictsGolden drives metrics through Evaluate and Record with
// scripted provider results and records each run's verdict and reason in
// testdata/verdicts.golden: the wording users see in status and alerts.
func TestVerdictsGolden(t *testing.T) {
	type metricScript struct {
		metric  api.Metric
		results []Result
		dryRun  bool
	}
	num := func(vs ...float64) []Result {
		out := make([]Result, len(vs))
		for i, v := range vs {
			out[i] = Result{Value: v}
		}
		return out
	}
	vec := func(vs ...float64) Result { return Result{Value: vs} }
	noData := Result{Text: "[]", Phase: PhaseInconclusive, Message: "no data"}
	limits := func(m api.Metric, failure, inconclusive, consecutiveError int) api.Metric {
		m.FailureLimit = api.IntOrArg{Value: failure}
		m.InconclusiveLimit = api.IntOrArg{Value: inconclusive}
		m.ConsecutiveErrorLimit = api.IntOrArg{Value: consecutiveError}
		return m
	}
	rate := api.Metric{Name: "success-rate", Count: api.IntOrArg{Value: 5}, Interval: 1, SuccessCondition: "result[0] >= 0.99"}
	errs := api.Metric{Name: "error-rate", Count: api.IntOrArg{Value: 3}, Interval: 1, FailureCondition: "result > 0.01"}
	scenarios := []struct {
		name    string
		metrics []metricScript
	}{
		{"healthy", []metricScript{{metric: limits(rate, 0, 0, 4), results: []Result{vec(0.998), vec(0.999), vec(0.995), vec(1), vec(0.997)}}}},
		{"fails at once", []metricScript{{metric: limits(rate, 0, 0, 4), results: []Result{vec(0.912)}}}},
		{"fails after failureLimit 2", []metricScript{{metric: limits(rate, 2, 0, 4), results: []Result{vec(0.95), vec(0.999), vec(0.97), vec(0.93)}}}},
		{"failure condition", []metricScript{{metric: limits(errs, 0, 0, 4), results: num(0.001, 0.05)}}},
		{"no data", []metricScript{{metric: limits(rate, 0, 0, 4), results: []Result{noData}}}},
		{"NaN is no traffic", []metricScript{{metric: limits(errs, 0, 0, 4), results: []Result{{Value: math.NaN(), Text: "NaN", Phase: PhaseInconclusive, Message: "result is NaN (no traffic?)"}}}}},
		{"condition error", []metricScript{{metric: limits(rate, 0, 0, 0), results: []Result{vec()}}}},
		{"dry run failure", []metricScript{
			{metric: limits(errs, 0, 0, 4), results: num(0.5, 0.5, 0.5), dryRun: true},
			{metric: limits(rate, 0, 0, 4), results: []Result{vec(1), vec(1), vec(1), vec(1), vec(1)}},
		}},
	}
	var b strings.Builder
	for _, sc := range scenarios {
		var status []MetricStatus
		for _, ms := range sc.metrics {
			m, err := NewMetric(ms.metric, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.DryRun = ms.dryRun
			s := MetricStatus{Name: m.Name, DryRun: m.DryRun}
			for _, r := range ms.results {
				if s.Phase.Completed() {
					break
				}
				meas := Measurement{Value: valueText(r)}
				meas.Phase, meas.Message = Evaluate(&m, r)
				s.Record(&m, meas)
			}
			status = append(status, s)
		}
		phase, reason := RunPhase(status)
		fmt.Fprintf(&b, "%s: %s: %s\n", sc.name, phase, reason)
	}
	testkit.Golden(t, filepath.Join("testdata", "verdicts.golden"), []byte(b.String()))
}
