package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// execute carries out the actions of one transition, in order. Failures
// are logged and, where the machine must know, fed back as events.
func (r *Runner) execute(e *entry, acts []rollout.Action, now time.Time) {
	for _, a := range acts {
		switch a := a.(type) {
		case rollout.SetTraffic:
			r.setTraffic(e, a)
		case rollout.StartAnalysis:
			r.startAnalysis(e, a)
		case rollout.StopAnalysis:
			if run, ok := e.runs[a.Run]; ok {
				run.spans.stop()
				run.halt()
				delete(e.runs, a.Run)
			}
		case rollout.StartTimer:
			r.startTimer(e, a.Timer, now)
		case rollout.CancelTimer:
			if t, ok := e.timers[a.ID]; ok {
				t.Stop()
				delete(e.timers, a.ID)
			}
		case rollout.ScaleWorkloads:
			r.scaleWorkloads(e, a)
		case rollout.Notify:
			r.enqueueAlert(e.key, alert.FromRollout(a.Alert, now))
		}
	}
}

// setTraffic publishes the traffic and follows its ACK in the background;
// a newer SetTraffic of the same rollout supersedes the wait.
func (r *Runner) setTraffic(e *entry, a rollout.SetTraffic) {
	if e.ackCancel != nil {
		e.ackCancel()
		e.ackCancel = nil
	}
	key := e.key
	if a.Traffic.Host == "" && a.Traffic.Routing == nil {
		// No sluice.io/xds routing and no cluster router: nothing to
		// publish or wait for.
		r.Submit(key, rollout.TrafficAcked{Gen: a.Gen})
		return
	}
	push, ack := r.startPush(e.state, a)
	// The owner of a host is decided by the records, not by which
	// rollout happens to publish first (after a restart, in parallel).
	err := r.hostRefusal(a.Traffic)
	var version string
	if err == nil {
		version, err = r.opts.Traffic.SetTraffic(a.Traffic)
	}
	if err != nil {
		r.log.Error("publish traffic", "rollout", key.String(), "gen", a.Gen, "err", err)
		r.endPush(push, ack, "", "refused", err)
		r.Submit(key, rollout.TrafficNacked{Gen: a.Gen, Reason: "publish: " + err.Error()})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ackCancel = cancel
	r.waits.Add(1)
	go func() {
		defer r.waits.Done()
		defer cancel()
		err := r.waitForAck(ctx, key, a, version)
		var unverified *UnverifiedError
		switch {
		case err == nil:
			r.endPush(push, ack, version, "acked", nil)
			r.Submit(key, rollout.TrafficAcked{Gen: a.Gen})
		case errors.As(err, &unverified):
			r.endPush(push, ack, version, "unverified", nil)
			r.Submit(key, rollout.TrafficAcked{Gen: a.Gen, Unverified: unverified.Message})
		case errors.Is(err, context.Canceled) || ctx.Err() != nil:
			// Superseded by newer traffic, or the runner is closing.
			r.endPush(push, ack, version, "superseded", err)
		case errors.Is(err, context.DeadlineExceeded):
			r.log.Warn("xds ack timed out; the step goes on", "rollout", key.String(), "gen", a.Gen, "version", version, "err", err)
			r.endPush(push, ack, version, "timeout", err)
			r.Submit(key, rollout.TrafficAckTimeout{Gen: a.Gen})
		default:
			r.log.Warn("xds nack", "rollout", key.String(), "gen", a.Gen, "version", version, "err", err)
			r.endPush(push, ack, version, "nack", err)
			r.Submit(key, rollout.TrafficNacked{Gen: a.Gen, Reason: err.Error()})
		}
	}()
}

// waitForAck waits up to AckTimeout for the clients' ACK of version, and
// for as many more rounds as the traffic stays held back unpublished
// (HeldError): the step must not go on while sluice knows its weight is
// not in force. ctx ends the wait when newer traffic supersedes it.
func (r *Runner) waitForAck(ctx context.Context, key api.Key, a rollout.SetTraffic, version string) error {
	for round := 1; ; round++ {
		wait, cancel := context.WithTimeout(ctx, r.opts.AckTimeout)
		err := r.opts.Traffic.WaitForAck(wait, a.Traffic.Host, version)
		roundEnded := wait.Err() != nil
		cancel()
		var held *HeldError
		if !errors.As(err, &held) || !roundEnded || ctx.Err() != nil {
			return err
		}
		r.log.Warn("traffic still held; the step waits for it", "rollout", key.String(), "gen", a.Gen, "side", held.Side,
			"waited", time.Duration(round)*r.opts.AckTimeout)
	}
}

// Back-off of a ScaleWorkloads the cluster refused (the apiserver is down
// or overloaded): it is declarative, so it is simply applied again.
const (
	scaleRetryMin = 500 * time.Millisecond
	scaleRetryMax = 30 * time.Second
)

// scaleAheadTimeout bounds how long an Ahead ScaleWorkloads holds up the
// actions after it: an abort must not wait on an unreachable API server
// to move traffic back. Past it the apply goes on in the background.
const scaleAheadTimeout = 5 * time.Second

// scaleWorkloads queues the apply of the desired ReplicaSets (scale.go),
// retried until it succeeds or a newer ScaleWorkloads of the rollout
// supersedes it. The machine waits for PodsReady, so a failed apply never
// moves traffic; it only shows as a wait and in the log. An Ahead one is
// first tried here, before the actions after it (an abort's mark before
// its traffic).
func (r *Runner) scaleWorkloads(e *entry, a rollout.ScaleWorkloads) {
	if r.opts.Workloads == nil {
		r.log.Error("scale workloads: not in Kubernetes mode", "rollout", e.key.String(), "gen", a.Gen)
		return
	}
	if e.scaleCancel != nil {
		e.scaleCancel()
		e.scaleCancel = nil
	}
	if a.Ahead && r.scaleAhead(a, e.scaleDone) {
		return
	}
	j := r.enqueueScale(a)
	e.scaleCancel, e.scaleDone = j.cancel, j.done
}

// scaleAhead applies a at once, within scaleAheadTimeout, and reports
// whether it succeeded. It first lets the superseded apply (closing
// prior) stop: one still in flight could land after a and take its mark
// off again.
func (r *Runner) scaleAhead(a rollout.ScaleWorkloads, prior <-chan struct{}) bool {
	ctx, cancel := context.WithTimeout(context.Background(), scaleAheadTimeout)
	defer cancel()
	if prior != nil {
		select {
		case <-prior:
		case <-ctx.Done():
		}
	}
	if err := r.opts.Workloads.Scale(ctx, a); err != nil {
		r.log.Warn("scale workloads ahead of traffic failed; the traffic moves anyway and the apply is retried", "rollout", a.Rollout.String(), "gen", a.Gen, "err", err)
		return false
	}
	r.opts.Workloads.Resend(a.Rollout)
	return true
}

// startTimer arms (or re-arms) a timer whose firing comes back as an
// event. A timer re-armed after a restart waits only for the time left
// until its stored deadline (none, if it passed while sluice was down).
func (r *Runner) startTimer(e *entry, t rollout.Timer, now time.Time) {
	if old, ok := e.timers[t.ID]; ok {
		old.Stop()
	}
	wait := t.Duration
	if d, ok := e.deadlines[t.ID]; ok {
		wait = max(d.Sub(now), 0)
	}
	key, id := e.key, t.ID
	e.timers[id] = time.AfterFunc(wait, func() { r.Submit(key, rollout.TimerFired{ID: id}) })
}

// analysisRun is one started run; halt stops it and mutes its reports.
type analysisRun struct {
	spans *runSpan
	once  sync.Once
	mu    sync.Mutex
	done  bool
	stop  func()
}

func (a *analysisRun) halt() {
	a.once.Do(func() {
		a.mu.Lock()
		a.done = true
		a.mu.Unlock()
		if a.stop != nil {
			a.stop()
		}
	})
}

func (a *analysisRun) halted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done
}

// startAnalysis starts a run through the Analyzer, or, with none wired,
// reports it Inconclusive so the canary pauses rather than passing.
func (r *Runner) startAnalysis(e *entry, a rollout.StartAnalysis) {
	if old, ok := e.runs[a.Run]; ok {
		old.halt() // a replay after restart starts the run afresh
	}
	key := e.key
	if r.opts.Analyzer == nil {
		r.log.Warn("no analysis engine; the run is inconclusive", "rollout", key.String(), "run", a.Run)
		r.Submit(key, rollout.AnalysisResult{Run: a.Run, Phase: rollout.AnalysisInconclusive, Message: NoAnalyzerMessage})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	spans := r.startRunSpan(e.state, a)
	run := &analysisRun{spans: spans}
	report := func(res rollout.AnalysisResult) {
		if run.halted() {
			return
		}
		res.Run = a.Run
		spans.report(r.tracer, res)
		r.Submit(key, res)
	}
	stop := r.opts.Analyzer.Start(ctx, a, report)
	run.stop = func() {
		if stop != nil {
			stop()
		}
		cancel()
	}
	e.runs[a.Run] = run
}

// enqueueAlert hands an alert to the outbox, or logs it with none wired.
func (r *Runner) enqueueAlert(key api.Key, a alert.Alert) {
	a.TraceID = r.traceID(a.Commit)
	r.log.Info("alert", "rollout", key.String(), "id", a.ID, "event", string(a.Event), "severity", string(a.Severity), "reason", a.Reason)
	if r.opts.Alerter == nil {
		return
	}
	if err := r.opts.Alerter.Enqueue(a); err != nil {
		r.log.Error("enqueue alert", "rollout", key.String(), "id", a.ID, "err", err)
	}
}
