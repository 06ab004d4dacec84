package runner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// orderedWorkloads is a Workloads double at the edge (the real one needs
// an API server; controller/workload tests it there): it records, in one
// log shared with the traffic double, when each apply ends, and holds the
// apply of gen 1 until released, like a slow API server.
type orderedWorkloads struct {
	log     *eventLog
	release chan struct{}
	held    chan struct{} // closed once gen 1 is at the "API server"
}

func (w *orderedWorkloads) Scale(_ context.Context, a rollout.ScaleWorkloads) error {
	if a.Gen == 1 {
		close(w.held)
		// Cancelling does not stop a request the API server already has:
		// it lands when it lands, the worst case for the mark.
		<-w.release
	}
	w.log.add(fmt.Sprintf("scale gen=%d ahead=%v", a.Gen, a.Ahead))
	return nil
}

func (w *orderedWorkloads) Resend(api.Key) {}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// TestAheadScaleLandsBeforeTraffic: an abort's ScaleWorkloads (Ahead:
// it carries the mark that a state lost later must find) is applied before
// the SetTraffic after it is published, and only after the superseded
// apply still in flight has ended, which could otherwise land last and take
// the mark off again. A plain ScaleWorkloads is applied in the background
// and does not hold the traffic up.
func TestAheadScaleLandsBeforeTraffic(t *testing.T) {
	log := &eventLog{}
	w := &orderedWorkloads{log: log, release: make(chan struct{}), held: make(chan struct{})}
	e := newEnv(t, envOptions{workloads: w})
	e.traffic.mu.Lock()
	e.traffic.onSet = func(tr api.Traffic) error {
		log.add(fmt.Sprintf("traffic canary=%d", tr.Weights.Canary))
		return nil
	}
	e.traffic.mu.Unlock()
	key := api.Key{Namespace: "default", Name: "ahead"}
	traffic := func(canary int32) rollout.SetTraffic {
		return rollout.SetTraffic{Gen: uint64(canary) + 1, Traffic: api.Traffic{Rollout: key, Host: "ahead.example", Weights: api.CanaryWeights(canary)}}
	}
	ent := newEntry(rollout.State{Key: key})

	// A step's traffic, then its scale, held by the slow apply.
	e.runner.execute(ent, []rollout.Action{traffic(50), rollout.ScaleWorkloads{Rollout: key, Gen: 1}}, time.Now())
	if got := log.snapshot(); !slices.Equal(got, []string{"traffic canary=50"}) {
		t.Fatalf("a plain scale held the traffic up or ran first: %v", got)
	}

	// The abort: its scale ahead of the traffic back to stable. The slow
	// apply, in flight (one superseded before it started is never applied),
	// ends a moment later.
	<-w.held
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(w.release)
	}()
	e.runner.execute(ent, []rollout.Action{rollout.ScaleWorkloads{Rollout: key, Gen: 2, Ahead: true}, traffic(0)}, time.Now())
	want := []string{"traffic canary=50", "scale gen=1 ahead=false", "scale gen=2 ahead=true", "traffic canary=0"}
	if got := log.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v: the abort's mark must be the last apply and land before its traffic", got, want)
	}
}
