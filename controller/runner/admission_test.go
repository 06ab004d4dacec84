package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// queueSteps hold a canary at 20 % until an operator acts.
func queueSteps() []api.Step { return []api.Step{setWeight(20), pause(0)} }

// startStable makes v1 stable and settled for every key.
func startStable(e *env, keys ...api.Key) {
	e.t.Helper()
	for _, k := range keys {
		e.do(k, rollout.Change{Commit: "1111111", Rollout: spec(k, "v1", queueSteps()...)})
		e.waitState(k, k.String()+" healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	}
}

// push submits v2 of each key in order, as the daemon does for one commit.
func push(e *env, commit string, keys ...api.Key) {
	e.t.Helper()
	for _, k := range keys {
		e.do(k, rollout.Change{Commit: commit, Class: rollout.ClassNewVersion, Rollout: spec(k, "v2", queueSteps()...)})
	}
}

// canaryAt waits until key's canary v2 runs at its first step.
func canaryAt(e *env, k api.Key) {
	e.t.Helper()
	e.waitState(k, k.String()+" canary at 20%", func(s rollout.State) bool {
		return s.CanaryVersion == "v2" && s.HoldsSlot() && s.Weights == api.CanaryWeights(20)
	})
}

// checkQueued checks that key waits at position with ahead canaries to
// finish before it, says so in its status, and that its traffic never left
// stable.
func checkQueued(e *env, k api.Key, ahead, position int) {
	e.t.Helper()
	e.waitState(k, k.String()+" queued", func(s rollout.State) bool { return s.Queued != nil })
	st, _ := e.runner.Status(k)
	want := fmt.Sprintf("Queued (%d ahead): ", ahead)
	if st.Queued == nil || st.Queued.Ahead != ahead || st.Queued.Position != position || !strings.HasPrefix(st.Message, want) {
		e.t.Fatalf("%s: status queued %+v, message %q; want %d ahead at position %d", k, st.Queued, st.Message, ahead, position)
	}
	if st.Phase != rollout.PhaseProgressing || st.CanaryVersion != "" || st.Weights != api.CanaryWeights(0) {
		e.t.Fatalf("%s queued: phase %s canary %q weights %+v", k, st.Phase, st.CanaryVersion, st.Weights)
	}
	if tr, ok := e.traffic.lastFor(k); ok && (tr.Weights != api.CanaryWeights(0) || tr.CanaryVersion != "v1") {
		e.t.Fatalf("%s queued but its traffic moved: %+v to %s", k, tr.Weights, tr.CanaryVersion)
	}
}

// TestCanaryQueue runs the admission against the real bbolt store: the
// order is the submission order (not the keys'), a restart keeps the queue
// and its order, and slots free up on promote, abort and removal.
func TestCanaryQueue(t *testing.T) {
	a := api.Key{Namespace: "shop", Name: "a"}
	b := api.Key{Namespace: "shop", Name: "b"}
	c := api.Key{Namespace: "shop", Name: "c"}
	d := api.Key{Namespace: "shop", Name: "d"}
	dir, hook := t.TempDir(), newWebhook(t)
	limits := Limits{MaxConcurrent: 1}

	e1 := newEnv(t, envOptions{dir: dir, hook: hook, limits: limits})
	startStable(e1, a, b, c, d)
	push(e1, "2222222", c, d, a, b) // the order is the commit's, not the keys'
	canaryAt(e1, c)
	checkQueued(e1, d, 1, 1) // c has to finish first
	checkQueued(e1, a, 2, 2)
	checkQueued(e1, b, 3, 3)
	e1.drain()
	e1.close()

	// Restart: the queue and its order come back from the store.
	e2 := newEnv(t, envOptions{dir: dir, hook: hook, limits: limits})
	if err := e2.runner.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	canaryAt(e2, c)
	checkQueued(e2, d, 1, 1)
	checkQueued(e2, a, 2, 2)
	checkQueued(e2, b, 3, 3)
	// A newer commit with a new version of a keeps a's place.
	e2.do(a, rollout.Change{Commit: "3333333", Class: rollout.ClassNewVersion, Rollout: spec(a, "v3", queueSteps()...)})
	checkQueued(e2, a, 2, 2)

	steps := []struct {
		name   string
		finish func(e *env)
		starts api.Key
	}{
		{"promote frees the slot", func(e *env) {
			if _, err := e.runner.Command(context.Background(), c, rollout.CmdPromoteFull); err != nil {
				t.Fatal(err)
			}
		}, d},
		{"abort frees the slot", func(e *env) {
			if _, err := e.runner.Command(context.Background(), d, rollout.CmdAbort); err != nil {
				t.Fatal(err)
			}
		}, a},
		{"removal frees the slot", func(e *env) {
			e.do(a, rollout.Change{Commit: "4444444", Class: rollout.ClassRemoved})
		}, b},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.finish(e2)
			e2.waitState(st.starts, st.starts.String()+" started", func(s rollout.State) bool { return s.HoldsSlot() })
			if err := e2.runner.WaitIdle(context.Background()); err != nil {
				t.Fatal(err)
			}
			holding := 0
			for _, k := range []api.Key{a, b, c, d} {
				if s, _ := e2.runner.State(k); s.HoldsSlot() {
					holding++
				}
			}
			if holding != 1 {
				t.Fatalf("%d canaries hold a slot, limit 1", holding)
			}
		})
	}
}

// TestCanaryQueuePerNamespace: a full namespace does not hold up another.
func TestCanaryQueuePerNamespace(t *testing.T) {
	a1 := api.Key{Namespace: "a", Name: "one"}
	a2 := api.Key{Namespace: "a", Name: "two"}
	b1 := api.Key{Namespace: "b", Name: "one"}
	e := newEnv(t, envOptions{limits: Limits{MaxConcurrentPerNamespace: 1}})
	startStable(e, a1, a2, b1)
	push(e, "2222222", a1, a2, b1)
	canaryAt(e, a1)
	canaryAt(e, b1)
	checkQueued(e, a2, 1, 1)
	if _, err := e.runner.Command(context.Background(), a1, rollout.CmdAbort); err != nil {
		t.Fatal(err)
	}
	canaryAt(e, a2)
}

// TestNoLimitNoQueue: without limits a change gets no ticket and starts.
func TestNoLimitNoQueue(t *testing.T) {
	a := api.Key{Namespace: "shop", Name: "a"}
	b := api.Key{Namespace: "shop", Name: "b"}
	e := newEnv(t, envOptions{})
	startStable(e, a, b)
	push(e, "2222222", a, b)
	canaryAt(e, a)
	canaryAt(e, b)
}

// gatedStore holds the saves of one rollout until open is closed, once
// armed: that rollout's change is processed after the others of its
// commit.
type gatedStore struct {
	Store
	key   api.Key
	armed atomic.Bool
	open  chan struct{}
}

func (g *gatedStore) SaveRollout(key api.Key, state []byte) error {
	if key == g.key && g.armed.Load() {
		<-g.open
	}
	return g.Store.SaveRollout(key, state)
}

// TestCanaryQueueOrderWithinACommit: a commit's changes run in parallel
// (DoAll), but the slot goes to the first in the commit even when a later
// one is processed first.
func TestCanaryQueueOrderWithinACommit(t *testing.T) {
	a := api.Key{Namespace: "shop", Name: "a"}
	b := api.Key{Namespace: "shop", Name: "b"}
	var gate *gatedStore
	e := newEnv(t, envOptions{limits: Limits{MaxConcurrent: 1}, storeWrap: func(s Store) Store {
		gate = &gatedStore{Store: s, key: a, open: make(chan struct{})}
		return gate
	}})
	startStable(e, a, b)
	gate.armed.Store(true)
	var opened sync.Once
	release := func() { gate.armed.Store(false); opened.Do(func() { close(gate.open) }) }
	t.Cleanup(release) // a failing check must not leave a's worker blocked
	change := func(k api.Key) KeyedEvent {
		return KeyedEvent{Key: k, Event: rollout.Change{Commit: "2222222", Class: rollout.ClassNewVersion, Rollout: spec(k, "v2", queueSteps()...)}}
	}
	done := make(chan error, 1)
	go func() { done <- e.runner.DoAll(context.Background(), []KeyedEvent{change(a), change(b)}, nil) }()
	// b, second in the commit, is processed while a's save is held.
	e.waitState(b, "b processed", func(s rollout.State) bool { return s.Queued != nil || s.HoldsSlot() })
	if s, _ := e.runner.State(b); s.HoldsSlot() {
		t.Fatal("b took the slot before a, which comes first in the commit, was processed")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	canaryAt(e, a)
	checkQueued(e, b, 1, 1)
}
