package daemon

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gitwatch"
)

// refusedRevisions counts revisions that were not applied as a whole: over
// a strategy file limit, or processing them panicked.
type refusedRevisions struct {
	total *prometheus.CounterVec
}

func newRefusedRevisions(reg prometheus.Registerer) *refusedRevisions {
	r := &refusedRevisions{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_revisions_refused_total",
		Help: "Commits not applied as a whole: reason=limit (over a strategy file limit: file count, total size, or loading panicked) or reason=panic (applying it panicked). The strategy in force stays.",
	}, []string{"reason"})}
	for _, reason := range []string{"limit", "panic"} {
		r.total.WithLabelValues(reason)
	}
	reg.MustRegister(r.total)
	return r
}

// applySafely is apply with a panic in it (diff, conversion, event
// building: a bug that some commit reaches) turned into that commit's
// error: it is logged, reported to every rollout in force as its status
// error and a strategy-invalid alert, and the commit counts as processed,
// so a restart does not replay it into the same panic. Panics on the
// runner's and the store's goroutines are not on this path and are not
// caught here.
func (d *Daemon) applySafely(ctx context.Context, rev gitwatch.Revision) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		d.log.Error("panic while applying revision", "commit", short(rev.Commit), "panic", r, "stack", string(debug.Stack()))
		d.refused.total.WithLabelValues("panic").Inc()
		diag := api.Diagnostic{File: rev.Commit, Message: fmt.Sprintf("internal error while applying commit %s: %v", short(rev.Commit), r), Severity: api.SeverityError}
		err = d.reportRefused(ctx, rev, api.Diagnostics{diag})
	}()
	return d.apply(ctx, rev)
}

// refuse applies a Refused revision: nothing in it changes what runs; its
// errors go to every rollout in force (status and strategy-invalid alert).
func (d *Daemon) refuse(ctx context.Context, rev gitwatch.Revision) error {
	d.refused.total.WithLabelValues("limit").Inc()
	d.log.Error("revision refused: the strategy in force stays", "commit", short(rev.Commit), "errors", rev.Set.Diagnostics.Errors())
	return d.reportRefused(ctx, rev, rev.Set.Diagnostics.Errors())
}

func (d *Daemon) reportRefused(ctx context.Context, rev gitwatch.Revision, diags api.Diagnostics) error {
	for _, r := range d.inForce().Rollouts {
		if _, err := d.runner.Do(ctx, r.Key, rollout.Invalid{Commit: rev.Commit, Errors: diags}); err != nil {
			return fmt.Errorf("report refused commit %s to %s: %w", short(rev.Commit), r.Key, err)
		}
	}
	return nil
}
