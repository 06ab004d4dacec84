package analysis

import (
	"fmt"
	"regexp"
	"time"

	"github.com/expr-lang/expr/vm"

	"github.com/sluice-dev/sluice/api"
)

// DefaultRetention is how many measurements a metric keeps when no
// measurementRetention applies, as in Argo Rollouts.
const DefaultRetention = 10

// Metric is one template metric made ready to run: arguments substituted
// everywhere (queries, URLs, conditions, IntOrArg limits), limits turned
// into numbers, conditions compiled once.
type Metric struct {
	Name         string
	Interval     time.Duration
	InitialDelay time.Duration
	// Count is how many measurements to take; 0 means until stopped.
	Count                   int
	FailureLimit            int // -1: failures never fail the metric (Argo)
	InconclusiveLimit       int
	ConsecutiveErrorLimit   int
	ConsecutiveSuccessLimit int
	SuccessCondition        string
	FailureCondition        string
	Provider                api.Provider
	DryRun                  bool
	Retention               int

	// critical is a sluice.io/judge metric marked critical: one failed
	// judgement fails the metric whatever its failureLimit (Kayenta).
	critical bool

	success, failure *vm.Program
}

// Default conditions of a judge metric that sets none: the score
// thresholds of Kayenta's classifier (pass >= 95, marginal >= 75).
const (
	judgeSuccessCondition = "result >= 95"
	judgeFailureCondition = "result < 75"
)

// Plan resolves the metrics of every template of a run, in template order.
func Plan(spec RunSpec) ([]Metric, error) {
	a, err := resolveArgs(spec.Templates, spec.Args, spec.Builtins)
	if err != nil {
		return nil, err
	}
	var dryRun []string
	retention := map[string]int{}
	for _, t := range spec.Templates {
		dryRun = append(dryRun, t.DryRun...)
		for k, v := range t.MeasurementRetention {
			retention[k] = v
		}
	}
	dryRun = append(dryRun, spec.DryRun...)
	for k, v := range spec.MeasurementRetention {
		retention[k] = v
	}
	var out []Metric
	seen := map[string]bool{}
	for _, t := range spec.Templates {
		for _, m := range t.Metrics {
			if seen[m.Name] {
				return nil, fmt.Errorf("metric %s: defined by more than one template", m.Name)
			}
			seen[m.Name] = true
			rm, err := newMetric(m, a)
			if err != nil {
				return nil, fmt.Errorf("metric %s: %w", m.Name, err)
			}
			rm.DryRun = matchesAny(dryRun, m.Name)
			rm.Retention = DefaultRetention
			for pattern, n := range retention {
				if n > 0 && matches(pattern, m.Name) {
					rm.Retention = n
				}
			}
			out = append(out, rm)
		}
	}
	return out, nil
}

// NewMetric prepares one metric with the given argument values; it is
// what Plan does per metric, exposed for tests and tools.
func NewMetric(m api.Metric, argValues map[string]string) (Metric, error) {
	rm, err := newMetric(m, args(argValues))
	if err != nil {
		return Metric{}, err
	}
	rm.Retention = DefaultRetention
	return rm, nil
}

func newMetric(m api.Metric, a args) (Metric, error) {
	rm := Metric{
		Name:             m.Name,
		Interval:         m.Interval,
		InitialDelay:     m.InitialDelay,
		SuccessCondition: m.SuccessCondition,
		FailureCondition: m.FailureCondition,
	}
	ints := []struct {
		field string
		in    api.IntOrArg
		out   *int
	}{
		{"count", m.Count, &rm.Count},
		{"failureLimit", m.FailureLimit, &rm.FailureLimit},
		{"inconclusiveLimit", m.InconclusiveLimit, &rm.InconclusiveLimit},
		{"consecutiveErrorLimit", m.ConsecutiveErrorLimit, &rm.ConsecutiveErrorLimit},
		{"consecutiveSuccessLimit", m.ConsecutiveSuccessLimit, &rm.ConsecutiveSuccessLimit},
	}
	for _, f := range ints {
		v, err := a.intValue(f.in)
		if err != nil {
			return Metric{}, fmt.Errorf("%s: %w", f.field, err)
		}
		*f.out = v
	}
	if rm.Count == 0 && rm.Interval == 0 {
		rm.Count = 1 // Argo's EffectiveCount
	}
	if m.Provider.Judge != nil {
		rm.critical = m.Provider.Judge.Critical
		if rm.SuccessCondition == "" && rm.FailureCondition == "" {
			rm.SuccessCondition, rm.FailureCondition = judgeSuccessCondition, judgeFailureCondition
		}
	}
	if err := a.expandAll(&rm.SuccessCondition, &rm.FailureCondition); err != nil {
		return Metric{}, fmt.Errorf("condition: %w", err)
	}
	var err error
	if rm.SuccessCondition != "" {
		if rm.success, err = api.CompileCondition(rm.SuccessCondition); err != nil {
			return Metric{}, fmt.Errorf("successCondition: %w", err)
		}
	}
	if rm.FailureCondition != "" {
		if rm.failure, err = api.CompileCondition(rm.FailureCondition); err != nil {
			return Metric{}, fmt.Errorf("failureCondition: %w", err)
		}
	}
	if rm.Provider, err = expandProvider(m.Provider, a); err != nil {
		return Metric{}, fmt.Errorf("provider: %w", err)
	}
	return rm, nil
}

// expandProvider copies p with arguments substituted in every string the
// user writes.
func expandProvider(p api.Provider, a args) (api.Provider, error) {
	out := api.Provider{Kind: p.Kind, Unsupported: p.Unsupported}
	if p.Prometheus != nil {
		c := *p.Prometheus
		if err := a.expandAll(&c.Address, &c.Query); err != nil {
			return out, err
		}
		h, err := a.expandMap(c.Headers)
		if err != nil {
			return out, err
		}
		c.Headers = h
		out.Prometheus = &c
	}
	if p.Web != nil {
		c := *p.Web
		if err := a.expandAll(&c.URL, &c.Method, &c.Body, &c.JSONPath); err != nil {
			return out, err
		}
		h, err := a.expandMap(c.Headers)
		if err != nil {
			return out, err
		}
		c.Headers = h
		out.Web = &c
	}
	if p.Judge != nil {
		c := *p.Judge
		if err := a.expandAll(&c.Address, &c.CanaryQuery, &c.BaselineQuery, &c.CanaryErrorsQuery, &c.CanaryTotalQuery, &c.BaselineErrorsQuery, &c.BaselineTotalQuery); err != nil {
			return out, err
		}
		out.Judge = &c
	}
	if p.Job != nil {
		j, err := expandJob(p.Job, a)
		if err != nil {
			return out, err
		}
		out.Job = j
	}
	return out, nil
}

// matches reports whether a dryRun or measurementRetention metric name
// pattern selects name: "*" selects all; otherwise the pattern is an exact
// name or, as in Argo, a regular expression (anchored here, so "error"
// does not select "error-rate" by accident).
func matches(pattern, name string) bool {
	if pattern == "*" || pattern == name {
		return true
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	return err == nil && re.MatchString(name)
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if matches(p, name) {
			return true
		}
	}
	return false
}
