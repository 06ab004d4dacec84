package analysis

import (
	"context"
	"fmt"
	"math"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// measureCounts judges the counts of the whole lookback window.
func (p *judgeProvider) measureCounts(ctx context.Context) (Result, error) {
	end := p.now()
	steps, err := p.countSteps(ctx, promv1.Range{Start: end.Add(-p.cfg.Lookback).Add(p.cfg.Step), End: end, Step: p.cfg.Step})
	if err != nil {
		return Result{}, err
	}
	var sum CountStep
	for _, s := range steps {
		sum = addSteps(sum, s)
	}
	return countResult(JudgeCounts(sum.CanaryEvents, sum.CanaryTotal, sum.BaselineEvents, sum.BaselineTotal, p.cfg)), nil
}

// measureSequential watches the counts step by step from now, for at
// most the lookback window, and returns as soon as the sequential test
// decides. Still open when the window ends, it is Inconclusive: the
// rollout pauses, it never passes on missing evidence.
func (p *judgeProvider) measureSequential(ctx context.Context) (Result, error) {
	start := p.now()
	total := max(int(p.cfg.Lookback/p.cfg.Step), 1)
	for k := 1; ; k++ {
		if !sleep(ctx, start.Add(time.Duration(k)*p.cfg.Step).Sub(p.now())) {
			return Result{}, ctx.Err()
		}
		steps, err := p.countSteps(ctx, promv1.Range{Start: start.Add(p.cfg.Step), End: start.Add(time.Duration(k) * p.cfg.Step), Step: p.cfg.Step})
		if err != nil {
			return Result{}, err
		}
		j := JudgeCountsSequential(steps, total, p.cfg)
		if j.Class != ClassOpen {
			return countResult(j), nil
		}
		if k >= total {
			return Result{Phase: PhaseInconclusive, Message: j.String() + " at the end of the window (lookback " + p.cfg.Lookback.String() + ")"}, nil
		}
	}
}

// countResult maps a count verdict to a measurement: the score for
// Pass/High/Low, Inconclusive without traffic.
func countResult(j CountJudgement) Result {
	if j.Class == ClassNoData {
		return Result{Phase: PhaseInconclusive, Message: j.String()}
	}
	s := j.Score()
	return Result{Value: s, Text: formatFloat(s), Message: j.String()}
}

func addSteps(a, b CountStep) CountStep {
	return CountStep{a.CanaryEvents + b.CanaryEvents, a.CanaryTotal + b.CanaryTotal, a.BaselineEvents + b.BaselineEvents, a.BaselineTotal + b.BaselineTotal}
}

// countSteps runs the four count queries over r, one CountStep per point
// in time. Each point is that step's count, so the queries' range
// selectors should equal the step (sum(increase(x[10s])) at step 10s).
// An errors query without series counts 0 (error counters often appear
// with the first error); a totals query without series is no traffic.
func (p *judgeProvider) countSteps(ctx context.Context, r promv1.Range) ([]CountStep, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	n := int(r.End.Sub(r.Start)/r.Step) + 1
	steps := make([]CountStep, max(n, 0))
	for _, q := range []struct {
		field, query string
		into         func(*CountStep) *float64
	}{
		{"canaryErrorsQuery", p.cfg.CanaryErrorsQuery, func(s *CountStep) *float64 { return &s.CanaryEvents }},
		{"canaryTotalQuery", p.cfg.CanaryTotalQuery, func(s *CountStep) *float64 { return &s.CanaryTotal }},
		{"baselineErrorsQuery", p.cfg.BaselineErrorsQuery, func(s *CountStep) *float64 { return &s.BaselineEvents }},
		{"baselineTotalQuery", p.cfg.BaselineTotalQuery, func(s *CountStep) *float64 { return &s.BaselineTotal }},
	} {
		points, err := p.series(ctx, q.field, q.query, r)
		if err != nil {
			return nil, err
		}
		for _, sp := range points {
			i := int(sp.Timestamp.Time().Sub(r.Start).Round(r.Step) / r.Step)
			if v := float64(sp.Value); i >= 0 && i < len(steps) && !math.IsNaN(v) && !math.IsInf(v, 0) {
				*q.into(&steps[i]) = v
			}
		}
	}
	return steps, nil
}

// series runs one range query and returns the points of its single
// series, none when it has no series.
func (p *judgeProvider) series(ctx context.Context, field, query string, r promv1.Range) ([]model.SamplePair, error) {
	v, _, _, err := p.api.QueryRange(ctx, query, r)
	if err != nil {
		return nil, p.engine.requestError(labelJudge, "judge "+field, p.timeout, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("judge %s: want a range vector, got %s", field, v.Type())
	}
	switch len(m) {
	case 0:
		return nil, nil
	case 1:
		return m[0].Values, nil
	}
	return nil, fmt.Errorf("judge %s: %d series; aggregate the query to one (e.g. sum(...))", field, len(m))
}
