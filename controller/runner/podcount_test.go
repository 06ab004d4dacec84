package runner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// countingStore counts the rollout writes that reach the real store under
// it.
type countingStore struct {
	Store
	saves atomic.Int64
}

func (s *countingStore) SaveRollout(key api.Key, state []byte) error {
	s.saves.Add(1)
	return s.Store.SaveRollout(key, state)
}

// appliedWorkloads is a Workloads double at the edge (the real actuator
// needs an API server; controller/workload tests it there): every apply
// succeeds at once.
type appliedWorkloads struct{}

func (appliedWorkloads) Scale(context.Context, rollout.ScaleWorkloads) error { return nil }
func (appliedWorkloads) Resend(api.Key)                                      {}

// TestPodCountReportsAreNotStored: a report that only counts pods (how
// many exist, none more Ready) moves the rollout's state but is not
// written; the report that makes a pod Ready is, with the counts before
// it. The store, read as a restart reads it, is one step behind in between.
func TestPodCountReportsAreNotStored(t *testing.T) {
	st := &countingStore{}
	e := newEnv(t, envOptions{workloads: appliedWorkloads{}, storeWrap: func(s Store) Store { st.Store = s; return st }})
	sp := spec(checkout, "v1")
	sp.Replicas = 1
	sp.Workload = &api.Workload{PodTemplateHash: "h1", MinPodsPerReplicaSet: api.DefaultMinPodsPerReplicaSet,
		ProgressDeadline: 10 * time.Minute, ScaleDownDelay: api.DefaultScaleDownDelay,
		AbortScaleDownDelay: api.DefaultAbortScaleDownDelay, RevisionHistoryLimit: api.DefaultRevisionHistoryLimit}
	e.do(checkout, rollout.Change{Commit: "1111111", Class: rollout.ClassNewVersion, Rollout: sp})
	// What the change's actions set off (an apply's report, timers) is
	// over before the count.
	idle(t, e)
	before, _ := e.runner.State(checkout)
	written := st.saves.Load()

	counted := e.do(checkout, rollout.PodsReady{Hash: "h1", Replicas: 1, Ready: 0})
	idle(t, e)
	if counted.Seq == before.Seq {
		t.Fatal("a report of a created pod did not move the state (the test needs a step to skip)")
	}
	if got := st.saves.Load(); got != written {
		t.Fatalf("a report that only counted pods was written (%d writes, want %d)", got, written)
	}
	if stored := storedSeq(t, e, checkout); stored != before.Seq {
		t.Fatalf("stored state at seq %d, want %d (the last written)", stored, before.Seq)
	}

	// The Ready report is written before its traffic moves; what that
	// traffic sets off (its ACK) may be written after it.
	ready := e.do(checkout, rollout.PodsReady{Hash: "h1", Replicas: 1, Ready: 1})
	if got := st.saves.Load(); got <= written {
		t.Fatalf("the report that made a pod Ready was not written (%d writes)", got)
	}
	if stored := storedSeq(t, e, checkout); stored < ready.Seq {
		t.Fatalf("stored state at seq %d, want %d or later", stored, ready.Seq)
	}
}

func idle(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.runner.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// storedSeq reads the rollout's record from the store as a restart does.
func storedSeq(t *testing.T, e *env, key api.Key) uint64 {
	t.Helper()
	b, ok, err := e.store.LoadRollout(key)
	if err != nil || !ok {
		t.Fatalf("load %s: ok %v, %v", key, ok, err)
	}
	rec, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return rec.State.Seq
}
