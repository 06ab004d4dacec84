package daemon

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/tracing"
	"github.com/sluice-dev/sluice/diffengine"
	"github.com/sluice-dev/sluice/gitwatch"
)

// The daemon's part of a commit's trace (the runner adds the rest below
// rollout.change; see controller/tracing for the ids):
//
//	commit          root, from the fetch that brought the commit to its last change persisted
//	├─ fetch        gitwatch's fetch (shared by the commits it brought)
//	├─ load         reading --path at the commit
//	├─ diff         diffengine against the specs in force
//	└─ rollout.change  one per rollout the commit changes, until persisted

const tracerName = "github.com/sluice-dev/sluice/controller/daemon"

// applyTraced is applySafely inside the commit's root span. A replayed
// commit (re-read after a restart) is not traced again.
func (d *Daemon) applyTraced(ctx context.Context, rev gitwatch.Revision) error {
	if rev.Replay {
		return d.applySafely(ctx, rev)
	}
	start := rev.Fetch.Start
	if start.IsZero() {
		start = time.Now()
	}
	ctx, root := tracing.Start(ctx, d.tracer, "commit", rev.Commit, nil, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("sluice.commit", rev.Commit), attribute.String("sluice.branch", rev.Branch),
			attribute.Bool("sluice.force_push", rev.ForcePush), attribute.Bool("sluice.changed", rev.Changed)))
	d.intervalSpan(ctx, "fetch", rev.Fetch)
	d.intervalSpan(ctx, "load", rev.Load)
	err := d.applySafely(ctx, rev)
	if err != nil {
		root.SetStatus(codes.Error, err.Error())
	}
	root.End()
	return err
}

// intervalSpan records a span for something that already happened; a zero
// interval (not done for this commit) records nothing.
func (d *Daemon) intervalSpan(ctx context.Context, name string, iv gitwatch.Interval) {
	if iv.Start.IsZero() {
		return
	}
	_, span := d.tracer.Start(ctx, name, trace.WithTimestamp(iv.Start))
	span.End(trace.WithTimestamp(iv.End))
}

// traceDiff runs diff inside the commit's diff span.
func (d *Daemon) traceDiff(ctx context.Context, diff func() []diffengine.Change) []diffengine.Change {
	_, span := d.tracer.Start(ctx, "diff")
	changes := diff()
	span.SetAttributes(attribute.Int("sluice.changes", len(changes)))
	span.End()
	return changes
}

// startChange starts the span of one rollout's change; the runner's spans
// for the rollout hang below it by its derived id.
func (d *Daemon) startChange(ctx context.Context, commit string, key api.Key, class string) (context.Context, trace.Span) {
	return tracing.Start(ctx, d.tracer, "rollout.change", commit, []string{key.String()},
		trace.WithAttributes(attribute.String("sluice.rollout", key.String()), attribute.String("sluice.commit", commit),
			attribute.String("sluice.change", class)))
}

// endChange ends a change span with the runner's answer.
func endChange(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
