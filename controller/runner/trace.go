package runner

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/tracing"
)

// The runner's spans, in the trace of the commit in force (State.Commit):
//
//	rollout.change (the daemon's, id from commit+rollout)
//	├─ step            one per step of a canary attempt, open while it runs
//	│  ├─ xds.push     publishing the step's traffic, until its ACK
//	│  │  └─ xds.ack   the wait for the ACK (clients, or the NACK)
//	│  └─ analysis.run one per run, until its verdict
//	│     └─ analysis.measurement  one per new measurement
//	└─ verdict         the canary's end: promoted or aborted, and why
//
// Every parent is named by a derived span id (controller/tracing), so a
// span started after a restart still lands in its place.

const tracerName = "github.com/sluice-dev/sluice/controller/runner"

// Span attribute keys (docs/alerts-and-metrics.md "Traces").
const (
	attrRollout       = attribute.Key("sluice.rollout")
	attrCommit        = attribute.Key("sluice.commit")
	attrStepIndex     = attribute.Key("sluice.step.index")
	attrStep          = attribute.Key("sluice.step")
	attrVersion       = attribute.Key("sluice.version")
	attrStableVersion = attribute.Key("sluice.version.stable")
	attrAttempt       = attribute.Key("sluice.attempt")
	attrWeightStable  = attribute.Key("sluice.weight.stable")
	attrWeightCanary  = attribute.Key("sluice.weight.canary")
	attrVerdict       = attribute.Key("sluice.verdict")
	attrReason        = attribute.Key("sluice.reason")
	attrClients       = attribute.Key("sluice.xds.clients")
	attrNack          = attribute.Key("sluice.xds.nack")
	attrXDSVersion    = attribute.Key("sluice.xds.version")
	attrRun           = attribute.Key("sluice.analysis.run")
	attrMetric        = attribute.Key("sluice.metric")
	attrValue         = attribute.Key("sluice.value")
	attrPhase         = attribute.Key("sluice.phase")
)

// Clients is implemented by a Traffic that can say how many xDS clients
// are connected (gateway's *Server); the ACK span reports it.
type Clients interface {
	Clients() int
}

// openStep is the step span a rollout has open.
type openStep struct {
	id   string
	span trace.Span
}

// stepParts names the span of the state's current step within its commit's
// trace; nil when no canary step is running.
func stepParts(s rollout.State) []string {
	if !s.CanaryActive() || s.Commit == "" || s.StepIndex >= s.StepCount() {
		return nil
	}
	return []string{s.Key.String(), "attempt", strconv.Itoa(s.Attempt), "step", strconv.Itoa(int(s.StepIndex))}
}

// parentOf is the context a span about s hangs below: its step when one
// runs, else its change.
func parentOf(s rollout.State) context.Context {
	if parts := stepParts(s); parts != nil {
		return tracing.Parent(context.Background(), s.Commit, parts...)
	}
	return tracing.Parent(context.Background(), s.Commit, s.Key.String())
}

func rolloutAttrs(s rollout.State) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrRollout.String(s.Key.String()), attrCommit.String(s.Commit),
		attrVersion.String(s.CanaryVersion), attrStableVersion.String(s.StableVersion),
	}
}

// traceTransition ends the step span the transition left and starts the
// one it entered, and records the verdict when a canary ends.
func (r *Runner) traceTransition(e *entry, old, next rollout.State) {
	if !r.tracing.Enabled() {
		return // off: not even the attributes are built
	}
	want := stepParts(next)
	wantID := ""
	if want != nil {
		wantID = strings.Join(append([]string{next.Commit}, want...), "\x00")
	}
	if e.step != nil && e.step.id != wantID {
		e.step.span.SetAttributes(attrWeightStable.Int(int(next.Weights.Stable)), attrWeightCanary.Int(int(next.Weights.Canary)))
		if next.Aborted {
			e.step.span.SetStatus(codes.Error, next.AbortReason)
		}
		e.step.span.End()
		e.step = nil
	}
	if want != nil && e.step == nil {
		step := next.Steps()[next.StepIndex]
		_, span := tracing.Start(tracing.Parent(context.Background(), next.Commit, next.Key.String()), r.tracer,
			"step", next.Commit, want, trace.WithAttributes(append(rolloutAttrs(next),
				attrStepIndex.Int(int(next.StepIndex)), attrStep.String(step.String()), attrAttempt.Int(next.Attempt))...))
		e.step = &openStep{id: wantID, span: span}
	}
	if old.CanaryActive() && !next.CanaryActive() && old.Commit != "" {
		r.traceVerdict(old, next)
	}
}

// traceVerdict records the end of a canary: promoted, aborted or no longer
// managed, with the reason.
func (r *Runner) traceVerdict(old, next rollout.State) {
	verdict, reason := "promoted", next.Message
	switch {
	case next.Aborted:
		verdict, reason = "aborted", next.AbortReason
	case next.Removed:
		verdict = "unmanaged"
	}
	_, span := r.tracer.Start(tracing.Parent(context.Background(), old.Commit, old.Key.String()), "verdict",
		trace.WithAttributes(append(rolloutAttrs(old), attrVerdict.String(verdict), attrReason.String(reason),
			attrWeightStable.Int(int(next.Weights.Stable)), attrWeightCanary.Int(int(next.Weights.Canary)))...))
	if next.Aborted {
		span.SetStatus(codes.Error, reason)
	}
	span.End()
}

// startPush starts the spans of one SetTraffic: the push, and below it the
// wait for its ACK, both ended by endPush.
func (r *Runner) startPush(s rollout.State, a rollout.SetTraffic) (push, ack trace.Span) {
	attrs := append(rolloutAttrs(s), attrWeightStable.Int(int(a.Traffic.Weights.Stable)), attrWeightCanary.Int(int(a.Traffic.Weights.Canary)))
	if s.CanaryActive() && s.StepIndex < s.StepCount() {
		attrs = append(attrs, attrStepIndex.Int(int(s.StepIndex)))
	}
	ctx, push := r.tracer.Start(parentOf(s), "xds.push", trace.WithAttributes(attrs...))
	_, ack = r.tracer.Start(ctx, "xds.ack", trace.WithAttributes(attrs...))
	return push, ack
}

// endPush ends the spans of startPush with the ACK's outcome: nil (every
// interested client ACKed), a NACK, or the wait's end.
func (r *Runner) endPush(push, ack trace.Span, version string, outcome string, err error) {
	attrs := []attribute.KeyValue{attrXDSVersion.String(version), attrVerdict.String(outcome)}
	if c, ok := r.opts.Traffic.(Clients); ok {
		attrs = append(attrs, attrClients.Int(c.Clients()))
	}
	if outcome == "nack" && err != nil {
		attrs = append(attrs, attrNack.String(err.Error()))
	}
	ack.SetAttributes(attrs...)
	if err != nil && outcome != "superseded" {
		ack.SetStatus(codes.Error, err.Error())
		push.SetStatus(codes.Error, err.Error())
	}
	ack.End()
	push.End()
}

// runSpan is the span of one analysis run and the last measurement it
// recorded per metric, so that each measurement becomes one span.
type runSpan struct {
	span trace.Span
	ctx  context.Context

	mu    sync.Mutex
	seen  map[string]rollout.Measurement
	ended bool
}

func (r *Runner) startRunSpan(s rollout.State, a rollout.StartAnalysis) *runSpan {
	parent := tracing.Parent(context.Background(), s.Commit, s.Key.String())
	if a.Kind == rollout.RunStep || a.Kind == rollout.RunExperiment {
		parent = parentOf(s)
	}
	ctx, span := tracing.Start(parent, r.tracer, "analysis.run", s.Commit, []string{s.Key.String(), "run", a.Run},
		trace.WithAttributes(append(rolloutAttrs(s), attrRun.String(a.Run), attribute.String("sluice.analysis.kind", string(a.Kind)))...))
	return &runSpan{span: span, ctx: ctx, seen: map[string]rollout.Measurement{}}
}

// report records the measurements a report adds, and the verdict when the
// report is the last.
func (rs *runSpan) report(tracer trace.Tracer, res rollout.AnalysisResult) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ended {
		return
	}
	for _, m := range res.Metrics {
		if len(m.Measurements) == 0 {
			continue
		}
		last := m.Measurements[len(m.Measurements)-1]
		if rs.seen[m.Name] == last {
			continue
		}
		rs.seen[m.Name] = last
		_, span := tracer.Start(rs.ctx, "analysis.measurement", trace.WithAttributes(
			attrMetric.String(m.Name), attrValue.String(last.Value), attrPhase.String(string(last.Phase))))
		if last.Phase == rollout.AnalysisFailed || last.Phase == rollout.AnalysisError {
			span.SetStatus(codes.Error, m.Message)
		}
		span.End()
	}
	if !res.Phase.Terminal() {
		return
	}
	rs.span.SetAttributes(attrVerdict.String(string(res.Phase)), attrReason.String(res.Message))
	if res.Metric != "" {
		rs.span.SetAttributes(attrMetric.String(res.Metric), attrValue.String(res.Value))
	}
	if res.Phase != rollout.AnalysisSuccessful {
		rs.span.SetStatus(codes.Error, res.Message)
	}
	rs.span.End()
	rs.ended = true
}

// stop ends the span of a run the machine stopped before its verdict (the
// step moved on, the canary was promoted or aborted). A run halted because
// the runner closes is left open: it starts again, same span id, on the
// next Start.
func (rs *runSpan) stop() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ended {
		return
	}
	rs.span.SetAttributes(attrVerdict.String("stopped"))
	rs.span.End()
	rs.ended = true
}

// traceID is the trace id an alert about commit links to: its commit's
// trace, when tracing is on.
func (r *Runner) traceID(commit string) string {
	if !r.tracing.Enabled() || commit == "" {
		return ""
	}
	return tracing.TraceID(commit).String()
}
