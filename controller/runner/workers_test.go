package runner

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// workGoroutines counts the goroutines running or waiting in
// Runner.work, from the process's goroutine profile.
func workGoroutines(t *testing.T) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b.Bytes(), []byte("runner.(*Runner).work("))
}

// TestWorkersServeRolloutsInTurn: rollouts busy one after the other are
// served by the workers that finished the earlier ones (a goroutine kept
// between rollouts keeps its grown stack), not one goroutine per rollout;
// Close ends the workers that wait for a rollout.
func TestWorkersServeRolloutsInTurn(t *testing.T) {
	e := newEnv(t, envOptions{})
	const n = 30
	for i := range n {
		k := api.Key{Namespace: "turns", Name: fmt.Sprintf("r%d", i)}
		startStable(e, k)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.runner.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	got := workGoroutines(t)
	if got == 0 || got >= n/3 {
		t.Errorf("after %d rollouts served in turn, %d worker goroutines wait, want between 1 and %d", n, got, n/3-1)
	}
	e.close()
	if got := workGoroutines(t); got != 0 {
		t.Errorf("after Close, %d worker goroutines are left, want 0", got)
	}
}

// holdingStore holds the saves of the rollouts stuck names until release is
// closed (all of them when stuck is nil), and counts the saves in flight:
// the test is about how many rollouts the runner works on at once, not
// about the store.
type holdingStore struct {
	Store
	stuck   map[string]bool
	release chan struct{}

	mu            sync.Mutex
	inFlight, max int
}

func (g *holdingStore) SaveRollout(key api.Key, b []byte) error {
	if g.stuck == nil || g.stuck[key.Name] {
		g.mu.Lock()
		g.inFlight++
		g.max = max(g.max, g.inFlight)
		g.mu.Unlock()
		<-g.release
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}
	return g.Store.SaveRollout(key, b)
}

func (g *holdingStore) maxInFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}

// TestWorkersBounded: a commit of many rollouts is worked on by at most
// MaxWorkers goroutines at once; the others wait their turn and are all
// served once the store answers.
func TestWorkersBounded(t *testing.T) {
	g := &holdingStore{release: make(chan struct{})}
	e := newEnv(t, envOptions{maxWorkers: 3, storeWrap: func(s Store) Store { g.Store = s; return g }})
	var released sync.Once
	release := func() { released.Do(func() { close(g.release) }) }
	t.Cleanup(release) // before the runner's Close: a failed check must not leave saves blocked
	const n = 12
	keys := make([]api.Key, n)
	for i := range keys {
		keys[i] = api.Key{Namespace: "bounded", Name: fmt.Sprintf("r%d", i)}
		e.runner.Submit(keys[i], rollout.Change{Commit: "1111111", Rollout: spec(keys[i], "v1", queueSteps()...)})
	}
	eventually(t, "3 saves in flight", func() bool { return g.maxInFlight() == 3 })
	time.Sleep(100 * time.Millisecond) // room for a fourth worker, if there were one
	if got := g.maxInFlight(); got != 3 {
		t.Errorf("%d rollouts saved at once with MaxWorkers 3", got)
	}
	if got := workGoroutines(t); got > 3 {
		t.Errorf("%d worker goroutines with MaxWorkers 3", got)
	}
	release()
	for _, k := range keys {
		e.waitState(k, k.String()+" healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	}
}

// TestStuckRolloutsLeaveWorkersToOthers: rollouts whose saves hang hold
// only their own workers; the other rollouts are served by the rest.
func TestStuckRolloutsLeaveWorkersToOthers(t *testing.T) {
	g := &holdingStore{stuck: map[string]bool{"stuck0": true, "stuck1": true}, release: make(chan struct{})}
	defer close(g.release)
	e := newEnv(t, envOptions{maxWorkers: 3, storeWrap: func(s Store) Store { g.Store = s; return g }})
	for _, name := range []string{"stuck0", "stuck1"} {
		k := api.Key{Namespace: "stuck", Name: name}
		e.runner.Submit(k, rollout.Change{Commit: "1111111", Rollout: spec(k, "v1", queueSteps()...)})
	}
	eventually(t, "both stuck rollouts saving", func() bool { return g.maxInFlight() == 2 })
	for i := range 20 {
		k := api.Key{Namespace: "free", Name: fmt.Sprintf("r%d", i)}
		e.runner.Submit(k, rollout.Change{Commit: "1111111", Rollout: spec(k, "v1", queueSteps()...)})
	}
	for i := range 20 {
		k := api.Key{Namespace: "free", Name: fmt.Sprintf("r%d", i)}
		e.waitState(k, k.String()+" healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	}
}
