package runner

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestSubscriberThatFallsBehindGetsEveryRolloutsLatest: the daemon's own
// subscribers (the event stream's status pump, the workloadRef scaler,
// the wave loop) fall behind in a large commit. Each must still learn the
// latest status of every rollout: before, a subscriber more than 256
// updates behind lost the newest ones ("subscriber too slow, update
// dropped", hundreds per 1,000-rollout run with no event-stream client),
// and a rollout whose last update was lost stayed stale for it.
func TestSubscriberThatFallsBehindGetsEveryRolloutsLatest(t *testing.T) {
	e := newEnv(t, envOptions{})
	sub := e.runner.Subscribe()
	defer sub.Cancel()

	const rollouts = 300 // more updates than any buffer of the old channel
	var keys []api.Key
	for i := range rollouts {
		key := api.Key{Namespace: "default", Name: fmt.Sprintf("app-%03d", i)}
		keys = append(keys, key)
		e.do(key, rollout.Change{Commit: "1111111aaa", Rollout: spec(key, "v1")})
	}
	for _, key := range keys {
		e.waitState(key, "healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	}
	if err := e.runner.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Only now does the subscriber read: it is as far behind as it can be.
	latest := map[api.Key]uint64{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Next returns what is pending, then stops instead of waiting
	for {
		u, ok := sub.Next(ctx)
		if !ok {
			break
		}
		if u.Seq <= latest[u.Key] {
			t.Fatalf("%s: update seq %d after %d", u.Key, u.Seq, latest[u.Key])
		}
		latest[u.Key] = u.Seq
	}
	missed := 0
	for _, key := range keys {
		s, _ := e.runner.State(key)
		if latest[key] != s.Seq {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d rollouts: the subscriber never got their latest update", missed, rollouts)
	}
}
