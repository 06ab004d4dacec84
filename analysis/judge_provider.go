package analysis

import (
	"context"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/sluice-dev/sluice/api"
)

// judgeProvider fetches canary and baseline samples with two Prometheus
// range queries over the lookback window and judges them; in count mode
// it fetches errors and totals with four, and judges the counts, either
// on the whole window (fixed) or step by step as they come (sequential).
type judgeProvider struct {
	engine  *Engine
	api     promv1.API
	cfg     api.JudgeProvider
	timeout time.Duration // both queries of one measurement
	now     func() time.Time
}

func (e *Engine) newJudge(c *api.JudgeProvider) (provider, error) {
	a, err := e.promAPI(labelJudge, c.Address, nil, "", false)
	if err != nil {
		return nil, err
	}
	return &judgeProvider{engine: e, api: a, cfg: JudgeConfig(*c), timeout: e.promTimeout, now: e.now}, nil
}

func (p *judgeProvider) measure(ctx context.Context, _ *Metric) (Result, error) {
	switch {
	case p.cfg.Counts() && p.cfg.Mode == api.JudgeSequential:
		return p.measureSequential(ctx)
	case p.cfg.Counts():
		return p.measureCounts(ctx)
	}
	return p.measureSamples(ctx)
}

func (p *judgeProvider) measureSamples(ctx context.Context) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	end := p.now()
	r := promv1.Range{Start: end.Add(-p.cfg.Lookback), End: end, Step: p.cfg.Step}
	canary, err := p.samples(ctx, "canaryQuery", p.cfg.CanaryQuery, r)
	if err != nil {
		return Result{}, err
	}
	baseline, err := p.samples(ctx, "baselineQuery", p.cfg.BaselineQuery, r)
	if err != nil {
		return Result{}, err
	}
	j := Judge(canary, baseline, p.cfg)
	if j.Class == ClassNoData {
		return Result{Phase: PhaseInconclusive, Message: j.String()}, nil
	}
	s := j.Score()
	return Result{Value: s, Text: formatFloat(s), Message: j.String()}, nil
}

// samples runs one range query; each point of its single series is a
// sample. Several series are an error: the query must aggregate.
func (p *judgeProvider) samples(ctx context.Context, field, query string, r promv1.Range) ([]float64, error) {
	points, err := p.series(ctx, field, query, r)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(points))
	for i, sp := range points {
		out[i] = float64(sp.Value)
	}
	return out, nil
}
