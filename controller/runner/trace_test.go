package runner

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/tracing"
)

// TestTracesSurviveRestart: a canary's spans land in its commit's trace,
// below its change, before and after a restart of the runner (a new
// process, a new tracer provider); the step open at the restart is sent
// once, by the runner that ends it; alerts carry the commit's trace id.
func TestTracesSurviveRestart(t *testing.T) {
	const commit = "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	dir, hook := t.TempDir(), newWebhook(t)
	steps := []api.Step{setWeight(20), pause(0)}
	rec1 := tracetest.NewSpanRecorder()
	e1 := newEnv(t, envOptions{dir: dir, hook: hook, tracing: tracing.WithProcessor(rec1)})
	e1.do(checkout, rollout.Change{Commit: "1111111aaaa", Rollout: spec(checkout, "v1", steps...)})
	e1.waitState(checkout, "v1 healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	e1.do(checkout, rollout.Change{Commit: commit, Rollout: spec(checkout, "v2", steps...)})
	e1.waitState(checkout, "the pause", func(s rollout.State) bool { return s.StepIndex == 1 && s.Phase == rollout.PhasePaused })
	e1.drain()
	e1.close()

	rec2 := tracetest.NewSpanRecorder()
	e2 := newEnv(t, envOptions{dir: dir, hook: hook, tracing: tracing.WithProcessor(rec2)})
	e2.waitState(checkout, "restarted", func(s rollout.State) bool { return s.StepIndex == 1 })
	if _, err := e2.runner.Command(context.Background(), checkout, rollout.CmdPromote); err != nil {
		t.Fatal(err)
	}
	e2.waitState(checkout, "v2 healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy && s.StableVersion == "v2" })
	e2.drain()

	change := tracing.SpanID(commit, checkout.String())
	step := func(i string) string {
		return tracing.SpanID(commit, checkout.String(), "attempt", "0", "step", i).String()
	}
	tests := []struct {
		name     string
		rec      *tracetest.SpanRecorder
		span     string
		spanID   string // "" for any
		parentID string
		count    int
	}{
		{"step 0 ends before the restart", rec1, "step", step("0"), change.String(), 1},
		{"its push", rec1, "xds.push", "", step("0"), 1},
		{"step 1 is not sent by the runner that closed", rec1, "step", step("1"), change.String(), 0},
		{"step 1 is sent after the restart", rec2, "step", step("1"), change.String(), 1},
		{"the verdict", rec2, "verdict", "", change.String(), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []sdktrace.ReadOnlySpan
			for _, s := range tt.rec.Ended() {
				if s.Name() == tt.span && s.Parent().SpanID().String() == tt.parentID &&
					(tt.spanID == "" || s.SpanContext().SpanID().String() == tt.spanID) {
					got = append(got, s)
				}
			}
			if len(got) != tt.count {
				t.Fatalf("%d %s spans (id %q, parent %s), want %d", len(got), tt.span, tt.spanID, tt.parentID, tt.count)
			}
			for _, s := range got {
				if s.SpanContext().TraceID() != tracing.TraceID(commit) {
					t.Errorf("%s in trace %s, want the commit's %s", tt.span, s.SpanContext().TraceID(), tracing.TraceID(commit))
				}
			}
		})
	}
	eventually(t, "completed alert", func() bool { return hook.has("default/checkout/2222222/completed") })
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for _, a := range hook.alerts {
		if a.Commit == commit && a.TraceID != tracing.TraceID(commit).String() {
			t.Errorf("alert %s traceId %q, want %s", a.ID, a.TraceID, tracing.TraceID(commit))
		}
	}
}
