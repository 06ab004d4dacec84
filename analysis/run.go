package analysis

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// run is one analysis run. The run loop is the only writer of status;
// one goroutine per metric measures and waits for the loop's word before
// measuring again, so a metric never measures past its verdict.
type run struct {
	e       *Engine
	id      string // unique per start: names the run's Kubernetes Jobs
	spec    RunSpec
	report  func(RunStatus)
	log     *slog.Logger
	metrics []Metric
	status  []MetricStatus
	phase   Phase
	reason  string
}

// measured is one finished measurement on its way to the run loop; the
// loop answers on next whether the metric should measure again.
type measured struct {
	idx   int
	m     Measurement
	value any
	next  chan bool
}

func (e *Engine) newRun(spec RunSpec, report func(RunStatus)) *run {
	return &run{
		e:      e,
		id:     newRunID(spec.Rollout.Name),
		spec:   spec,
		report: report,
		log:    e.log.With("run", spec.Name, "rollout", spec.Rollout.String()),
	}
}

func (r *run) run(ctx context.Context) {
	metrics, err := Plan(r.spec)
	if err != nil {
		r.phase, r.reason = PhaseError, err.Error()
		r.finish()
		return
	}
	r.metrics = metrics
	r.status = make([]MetricStatus, len(metrics))
	providers := make([]provider, len(metrics))
	for i := range metrics {
		r.status[i] = MetricStatus{Name: metrics[i].Name, Phase: PhasePending, DryRun: metrics[i].DryRun}
		p, err := r.e.newProvider(r, &metrics[i])
		if err != nil {
			r.status[i].Phase, r.status[i].Message = PhaseError, err.Error()
			continue
		}
		providers[i] = p
	}
	r.phase = PhaseRunning
	if r.decide() {
		r.finish()
		return
	}
	r.send()

	mctx, cancel := context.WithCancel(ctx)
	results := make(chan measured)
	var wg sync.WaitGroup
	for i, p := range providers {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.measureLoop(mctx, i, p, results)
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, p := range providers {
			if c, ok := p.(cleaner); ok {
				c.cleanup()
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return // stopped: no final report
		case res := <-results:
			again := r.record(res)
			if r.decide() {
				res.next <- false
				cancel()
				wg.Wait()
				r.finish()
				return
			}
			res.next <- again
			r.send()
		}
	}
}

// measureLoop takes measurements of one metric: after initialDelay, then
// interval after each one finished (Argo's schedule), until told to stop.
func (r *run) measureLoop(ctx context.Context, idx int, p provider, results chan<- measured) {
	m := &r.metrics[idx]
	if !sleep(ctx, m.InitialDelay) {
		return
	}
	next := make(chan bool)
	for {
		started := r.e.now()
		res, err := p.measure(ctx, m)
		if ctx.Err() != nil {
			return
		}
		meas := Measurement{StartedAt: started, FinishedAt: r.e.now()}
		if err == nil {
			res, err = boundValue(res)
		}
		if err != nil {
			meas.Phase, meas.Message = PhaseError, boundMessage(err.Error())
		} else {
			meas.Value = valueText(res)
			if res.Value == nil && res.Text == "" {
				meas.Value = ""
			}
			meas.Phase, meas.Message = Evaluate(m, res)
		}
		select {
		case results <- measured{idx: idx, m: meas, value: res.Value, next: next}:
		case <-ctx.Done():
			return
		}
		if !<-next {
			return
		}
		wait := m.Interval
		if meas.Phase == PhaseError && wait == 0 {
			wait = r.e.retry
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// record adds a measurement to its metric and says whether the metric
// needs more.
func (r *run) record(res measured) bool {
	m := &r.metrics[res.idx]
	s := &r.status[res.idx]
	s.Record(m, res.m)
	if v, ok := scalar(res.value); ok && res.m.Phase != PhaseError {
		r.e.metrics.value.WithLabelValues(r.spec.Rollout.Namespace, r.spec.Rollout.Name, m.Name).Set(v)
	}
	r.log.Debug("measurement", "metric", m.Name, "phase", res.m.Phase, "value", res.m.Value, "message", res.m.Message)
	return !s.Phase.Completed()
}

// decide settles the run phase; it reports whether the run is over. When
// a metric ends the run, the others are assessed as terminating.
func (r *run) decide() bool {
	if terminating(r.status) {
		for i := range r.status {
			if !r.status[i].Phase.Completed() {
				r.status[i].Phase, r.status[i].Message = Assess(&r.metrics[i], r.status[i].Tally, r.status[i].Measurements, true)
			}
		}
	}
	r.phase, r.reason = RunPhase(r.status)
	return r.phase.Completed()
}

func (r *run) finish() {
	r.e.metrics.runs.WithLabelValues(r.spec.Rollout.Namespace, r.spec.Rollout.Name, string(r.phase)).Inc()
	r.log.Info("analysis run finished", "phase", r.phase, "reason", r.reason)
	r.send()
}

// send reports a deep copy, so the caller may keep it.
func (r *run) send() {
	st := RunStatus{Name: r.spec.Name, Phase: r.phase, Reason: r.reason, Metrics: make([]MetricStatus, len(r.status))}
	for i, s := range r.status {
		s.Measurements = append([]Measurement(nil), s.Measurements...)
		st.Metrics[i] = s
	}
	st.Score = judgeScore(r.metrics, r.status)
	if r.report != nil {
		r.report(st)
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
