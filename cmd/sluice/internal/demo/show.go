package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// show gathers frames from the daemon's API, the load generator and the
// sink, draws them and feeds the recorder.
type show struct {
	opts       Options
	start      time.Time
	cl         *client.Client
	lg         *probe.LoadGen
	sink       *Sink
	live       *Live
	rec        *Recorder
	daemonDone chan error
}

var demoKey = api.Key{Namespace: Namespace, Name: RolloutName}

// frame reads the current state. A rollout the daemon does not know yet
// is a nil status, not an error.
func (s *show) frame(ctx context.Context, stage string) Frame {
	f := Frame{Elapsed: time.Since(s.start), Stage: stage, Observed: s.lg.Observe(), Alerts: s.sink.Alerts()}
	if st, err := s.cl.Get(ctx, demoKey); err == nil {
		f.Status = &st
		if ev, err := s.cl.Recent(ctx, demoKey); err == nil {
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
		case err := <-s.daemonDone:
			s.daemonDone <- err // for the shutdown path
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
