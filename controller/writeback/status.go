package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
)

// StatusSinkName is the outbox name of the commit status sink. A sink of
// its own, beside the revert's: a forge that is down or rate limited
// delays only the statuses.
const StatusSinkName = "git-writeback-status"

// maxRateLimitWait bounds how long the status sink honours a forge's
// "retry after": longer waits go back to the outbox's back-off.
const maxRateLimitWait = time.Minute

// StatusSinkOptions configure a StatusSink.
type StatusSinkOptions struct {
	Forge Forge
	// TargetURL links a status to the rollout in sluice's API or UI.
	TargetURL func(api.Key) string
	// Records receives what was posted; nil keeps none.
	Records *Records
	Logger  *slog.Logger
}

// StatusSink posts a commit status for every rollout's commit: pending
// while its canary runs (with the current step), success when promoted,
// failure with the reason when aborted. The context is
// sluice/<namespace>/<name>, so rollouts sharing a commit each get their
// own.
type StatusSink struct {
	opts StatusSinkOptions
	log  *slog.Logger
}

var _ alert.Sink = (*StatusSink)(nil)

// NewStatusSink validates opts.
func NewStatusSink(opts StatusSinkOptions) (*StatusSink, error) {
	if opts.Forge == nil {
		return nil, errors.New("status sink: no forge")
	}
	if opts.TargetURL == nil {
		opts.TargetURL = func(api.Key) string { return "" }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &StatusSink{opts: opts, log: opts.Logger}, nil
}

// Name implements alert.Sink.
func (s *StatusSink) Name() string { return StatusSinkName }

// StatusFor is the commit status an alert leads to; false for alerts
// that change no status.
func StatusFor(a alert.Alert) (CommitStatus, bool) {
	st := CommitStatus{Commit: a.Commit, Context: "sluice/" + a.Rollout}
	switch a.Event {
	case alert.EventRolloutStarted:
		st.State, st.Description = StatePending, a.Reason // "canary v2 against stable v1"
	case alert.EventStepCompleted, alert.EventRolloutPaused:
		st.State, st.Description = StatePending, fmt.Sprintf("canary %s: %s", a.Version, a.Reason)
	case alert.EventRolloutCompleted:
		st.State, st.Description = StateSuccess, fmt.Sprintf("promoted %s", a.Version)
	case alert.EventRolloutAborted:
		st.State, st.Description = StateFailure, fmt.Sprintf("aborted %s: %s", a.Version, a.Reason)
	default:
		return CommitStatus{}, false
	}
	return st, a.Commit != ""
}

// Send implements alert.Sink. A rate-limited forge is waited for (up to
// maxRateLimitWait) before the error goes back to the outbox, which
// retries; refusals that retrying cannot fix are dropped by it.
func (s *StatusSink) Send(ctx context.Context, a alert.Alert) error {
	st, ok := StatusFor(a)
	if !ok {
		return nil
	}
	key := api.ParseKey(a.Rollout)
	st.TargetURL = s.opts.TargetURL(key)
	err := s.opts.Forge.SetStatus(ctx, st)
	if s.opts.Records != nil {
		s.opts.Records.setStatus(key, st, err)
	}
	if err == nil {
		s.log.Debug("git writeback: commit status posted", "rollout", a.Rollout, "commit", a.Commit, "state", string(st.State))
		return nil
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		wait := min(apiErr.RetryAfter, maxRateLimitWait)
		s.log.Warn("git writeback: forge rate limit, waiting", "rollout", a.Rollout, "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return fmt.Errorf("commit status for %s: %w", a.Rollout, err)
}
