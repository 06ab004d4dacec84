package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
)

// Events the writeback sends as alerts (and so on the event stream).
const (
	EventWritebackSkipped = alert.EventWritebackSkipped
	EventWritebackFailed  = alert.EventWritebackFailed
)

// SinkName is the outbox name of the writeback sink. It must not change
// across releases: the outbox remembers what it delivered under it.
const SinkName = "git-writeback"

// SinkOptions configure a Sink.
type SinkOptions struct {
	// Reverter makes the revert commits; nil makes none.
	Reverter *Reverter
	// Stable returns the rollout's stable version now; the abort alert
	// names only the canary's.
	Stable func(api.Key) (string, bool)
	// Notify sends a follow-up alert (writeback-skipped, -failed); nil
	// only logs.
	Notify func(alert.Alert) error
	// Forge, with ReverterOptions.PushBranch set, opens a pull request
	// from that branch; nil only pushes it.
	Forge Forge
	// Records receives what was written back; nil keeps none.
	Records *Records
	Logger  *slog.Logger
}

// Sink is the alert.Sink that writes verdicts back to git. Going through
// the alert outbox gives it what it needs for free: the verdict is durable
// before it acts, a failed push is retried with back-off, a crash replays
// it, and a slow remote never blocks a rollout.
type Sink struct {
	opts SinkOptions
	log  *slog.Logger
}

var _ alert.Sink = (*Sink)(nil)

// NewSink validates opts.
func NewSink(opts SinkOptions) (*Sink, error) {
	if opts.Reverter != nil && opts.Stable == nil {
		return nil, errors.New("writeback sink: reverts need the stable version lookup")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Records == nil {
		opts.Records = NewRecords()
	}
	return &Sink{opts: opts, log: opts.Logger}, nil
}

// Name implements alert.Sink.
func (s *Sink) Name() string { return SinkName }

// Send implements alert.Sink. Only rollout-aborted leads to a revert; an
// error means "retry later" (the outbox does), nil means done or given up
// for good, which is then said in a follow-up alert.
func (s *Sink) Send(ctx context.Context, a alert.Alert) error {
	if a.Event != alert.EventRolloutAborted || s.opts.Reverter == nil {
		return nil
	}
	key := api.ParseKey(a.Rollout)
	stable, ok := s.opts.Stable(key)
	if !ok || stable == "" || stable == a.Version {
		s.log.Info("git writeback: nothing to revert", "rollout", a.Rollout, "stable", stable, "failed", a.Version)
		return nil
	}
	res, err := s.opts.Reverter.Revert(ctx, RevertRequest{Rollout: key, Failed: a.Version, Stable: stable, Commit: a.Commit, Reason: a.Reason})
	switch {
	case errors.Is(err, ErrCannotEdit):
		s.opts.Records.setRevert(key, Record{Revert: "failed", Message: err.Error()})
		s.notify(a, EventWritebackFailed, "revert not made: "+err.Error())
		return nil
	case err != nil:
		s.opts.Records.setRevert(key, Record{Revert: "retrying", Message: err.Error()})
		return fmt.Errorf("revert %s: %w", a.Rollout, err)
	}
	rec := Record{Revert: string(res.Outcome), RevertCommit: res.Commit, RevertBranch: res.Branch, Message: res.Message}
	if res.Outcome == Reverted && res.Branch != res.Base && s.opts.Forge != nil {
		url, err := s.opts.Forge.OpenPullRequest(ctx, PullRequest{Head: res.Branch, Base: res.Base, Title: res.Subject, Body: res.Body})
		switch {
		case errors.Is(err, ErrPullRequestExists):
			rec.Message += "; the pull request from " + res.Branch + " is already open"
		case err != nil:
			rec.Message += "; pull request not opened yet: " + err.Error()
			s.opts.Records.setRevert(key, rec)
			return fmt.Errorf("open pull request for %s: %w", a.Rollout, err)
		default:
			rec.PullRequest = url
		}
	}
	s.opts.Records.setRevert(key, rec)
	switch res.Outcome {
	case Superseded, NotFound:
		s.log.Warn("git writeback: revert skipped", "rollout", a.Rollout, "reason", res.Message)
		s.notify(a, EventWritebackSkipped, res.Message)
	}
	return nil
}

// notify sends a follow-up alert about the abort alert a.
func (s *Sink) notify(a alert.Alert, ev alert.Event, reason string) {
	if s.opts.Notify == nil {
		return
	}
	follow := a
	follow.ID, follow.Event, follow.Severity, follow.Reason = a.ID+"/"+string(ev), ev, alert.SeverityOf(ev), reason
	follow.Metric, follow.Value, follow.Condition = "", "", ""
	if err := s.opts.Notify(follow); err != nil {
		s.log.Error("git writeback: send alert", "id", follow.ID, "err", err)
	}
}
