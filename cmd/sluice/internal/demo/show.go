package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// show plays the demo in four acts over a running world, drawing frames
// from the daemon's API, the load generator and the sink, and feeding the
// recorder.
type show struct {
	opts  Options
	w     *world
	start time.Time
	live  *Live
	rec   *Recorder

	commit        string
	pushStage     string
	pushed, ended time.Time
}

var demoKey = api.Key{Namespace: Namespace, Name: RolloutName}

// drain is how long calls routed before the end may still be answered.
const drain = 500 * time.Millisecond

// play runs the acts and returns the rollout's final status.
func (s *show) play(ctx context.Context) (*httpapi.RolloutStatus, error) {
	// 1. The daemon syncs v1: stable at 100 %.
	if _, err := s.until(ctx, "waiting for the daemon's first sync", func(r *httpapi.RolloutStatus) bool {
		return r != nil && r.Phase == rollout.PhaseHealthy && r.StableVersion == StableVersion
	}); err != nil {
		return nil, err
	}
	// 2. Load through the xDS clients; let the audience see v1 answer.
	s.w.startLoad()
	if _, err := s.w.load.WaitFirst(ctx, StableVersion); err != nil {
		return nil, fmt.Errorf("load generator never reached %s: %w", StableVersion, err)
	}
	if err := s.hold(ctx, fmt.Sprintf("sending %g requests/s to xds:///%s", s.opts.Rate, Host), 2*time.Second); err != nil {
		return nil, err
	}
	// 3. Push v2 and follow the rollout to its end.
	final, err := s.push(ctx)
	if err != nil {
		return nil, err
	}
	// 4. The result in traffic, and the alert.
	return final, s.result(ctx, final)
}

func (s *show) push(ctx context.Context) (*httpapi.RolloutStatus, error) {
	var err error
	if s.commit, err = s.w.commit(ctx, CanaryVersion); err != nil {
		return nil, err
	}
	s.pushed = time.Now()
	s.rec.Pushed(s.pushed)
	s.pushStage = fmt.Sprintf("pushed %s (commit %s, %s)", CanaryVersion, shortSHA(s.commit), s.w.repo.Tool())
	if err := pokeWebhook(ctx, s.w.httpAddr, s.w.secret); err != nil {
		s.pushStage += "; webhook failed, waiting for the poll: " + err.Error()
	}
	final, err := s.until(ctx, s.pushStage, func(r *httpapi.RolloutStatus) bool {
		return r != nil && r.Commit == s.commit && settled(r)
	})
	s.ended = time.Now()
	return final, err
}

// result shows the traffic after the end in a fresh window, and waits for
// the abort's alert to reach the sink.
func (s *show) result(ctx context.Context, final *httpapi.RolloutStatus) error {
	// The status can show the end a moment before every client has the
	// new routes, and calls already in flight were routed before: let them
	// drain, then count afresh.
	if err := s.hold(ctx, s.pushStage, drain); err != nil {
		return err
	}
	s.w.load.ResetWindow()
	stage := fmt.Sprintf("promoted: %s takes all traffic", CanaryVersion)
	if final.Aborted {
		stage = fmt.Sprintf("rolled back: all traffic is back on %s", final.StableVersion)
	}
	settle := max(1500*time.Millisecond, 3*time.Second/time.Duration(s.opts.Speed))
	_, err := s.until(ctx, stage, func(*httpapi.RolloutStatus) bool {
		if time.Since(s.ended) < settle {
			return false
		}
		return !final.Aborted || hasAlert(s.w.stage.sink.Alerts(), alert.EventRolloutAborted) || time.Since(s.ended) > 10*time.Second
	})
	return err
}

// summary gathers the recorder's timeline and the push facts.
func (s *show) summary() Summary {
	sum := s.rec.Summary()
	sum.Commit, sum.Tool = s.commit, s.w.repo.Tool()
	sum.PushToEnd = s.ended.Sub(s.pushed)
	if first, ok := s.w.load.FirstSeen(CanaryVersion); ok {
		sum.PushToCanary = first.Sub(s.pushed)
	}
	sum.Alerts = s.w.stage.sink.Alerts()
	sum.Observed = s.w.load.Observe()
	return sum
}

// frame reads the current state. A rollout the daemon does not know yet
// is a nil status, not an error.
func (s *show) frame(ctx context.Context, stage string) Frame {
	f := Frame{Elapsed: time.Since(s.start), Stage: stage, Observed: s.w.load.Observe(), Alerts: s.w.stage.sink.Alerts()}
	if st, err := s.w.api.Get(ctx, demoKey); err == nil {
		f.Status = &st
		if ev, err := s.w.api.Recent(ctx, demoKey); err == nil {
			f.Events = ev
		}
	}
	return f
}

// until redraws every refresh until done holds for the latest status,
// and returns that status.
func (s *show) until(ctx context.Context, stage string, done func(*httpapi.RolloutStatus) bool) (*httpapi.RolloutStatus, error) {
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	for {
		f := s.frame(ctx, stage)
		s.rec.Observe(f)
		if err := s.live.Draw(f); err != nil {
			return nil, fmt.Errorf("draw: %w", err)
		}
		if done(f.Status) {
			return f.Status, nil
		}
		select {
		case <-ctx.Done():
			msg := "no status yet"
			if f.Status != nil {
				msg = fmt.Sprintf("%s: %s", f.Status.Phase, f.Status.Message)
			}
			return nil, fmt.Errorf("%s: gave up (%s): %w", stage, msg, ctx.Err())
		case err := <-s.w.daemonDone:
			s.w.daemonDone <- err // for close
			if err == nil {
				err = errors.New("no error")
			}
			return nil, fmt.Errorf("daemon stopped early: %w", err)
		case <-tick.C:
		}
	}
}

// hold keeps drawing for d.
func (s *show) hold(ctx context.Context, stage string, d time.Duration) error {
	end := time.Now().Add(d)
	_, err := s.until(ctx, stage, func(*httpapi.RolloutStatus) bool { return time.Now().After(end) })
	return err
}
