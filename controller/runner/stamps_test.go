package runner

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
)

// TestCreatedAtSurvives checks the times the runner stores beside a
// rollout's state: createdAt is when it was first seen and stays so across
// a new commit and a restart (bbolt), phaseSince moves only when the phase
// changes; a record stored before these times were kept still loads, with
// createdAt unknown.
func TestCreatedAtSurvives(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var clock atomic.Int64 // offset from t0
	now := func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	status := func(e *env, key api.Key) rollout.Status {
		t.Helper()
		s, ok := e.runner.Status(key)
		if !ok {
			t.Fatalf("no status for %s", key)
		}
		return s
	}

	e1 := newEnv(t, envOptions{dir: dir, now: now})
	e1.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", setWeight(50), pause(0))})
	if s := status(e1, checkout); s.CreatedAt != at(0) || s.PhaseSince != at(0) {
		t.Fatalf("first seen: createdAt %q phaseSince %q, want both %s", s.CreatedAt, s.PhaseSince, at(0))
	}
	clock.Store(int64(5 * time.Minute))
	e1.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", setWeight(50), pause(0))})
	e1.waitState(checkout, "the final pause", func(s rollout.State) bool { return s.Phase == rollout.PhasePaused })
	s := status(e1, checkout)
	if s.CreatedAt != at(0) || s.PhaseSince != at(5*time.Minute) {
		t.Fatalf("after a new version: createdAt %q phaseSince %q, want %s and %s", s.CreatedAt, s.PhaseSince, at(0), at(5*time.Minute))
	}
	if l := e1.runner.List(); len(l) != 1 || l[0].CreatedAt != at(0) {
		t.Fatalf("List: %+v", l)
	}
	paused := e1.do(checkout, rollout.Change{Commit: "3333333", Rollout: spec(checkout, "v2", setWeight(50), pause(0))})
	e1.drain()
	e1.close()

	// A record from before the times were kept, for another rollout.
	old := api.Key{Namespace: "default", Name: "old"}
	oldState := paused
	oldState.Key = old
	// Its own spec and host: a second record naming checkout's host
	// would not own it (checkout was created first).
	oldSpec := *oldState.Spec
	oldSpec.Key, oldSpec.XDS = old, &api.XDSConfig{Host: "old.internal", Endpoints: oldSpec.XDS.Endpoints}
	oldState.Spec = &oldSpec
	b, err := encodeRecord(record{State: oldState, Time: t0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveRollout(old, b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// An hour later, restarted: the times are the stored ones.
	clock.Store(int64(time.Hour))
	e2 := newEnv(t, envOptions{dir: dir, now: now})
	e2.waitState(checkout, "restart", func(n rollout.State) bool { return n.Seq > paused.Seq })
	e2.waitState(old, "restart", func(n rollout.State) bool { return n.Seq > oldState.Seq })
	if s := status(e2, checkout); s.CreatedAt != at(0) || s.PhaseSince != at(5*time.Minute) {
		t.Errorf("after a restart: createdAt %q phaseSince %q, want %s and %s", s.CreatedAt, s.PhaseSince, at(0), at(5*time.Minute))
	}
	if s := status(e2, old); s.CreatedAt != "" || s.PhaseSince != "" || s.Phase != rollout.PhasePaused {
		t.Errorf("an old record: %s createdAt %q phaseSince %q, want Paused with both unknown", s.Phase, s.CreatedAt, s.PhaseSince)
	}
	// Promoted: a new phase begins now; the old record's createdAt stays
	// unknown rather than becoming the time of its first change here.
	for _, k := range []api.Key{checkout, old} {
		if _, err := e2.runner.Command(t.Context(), k, rollout.CmdPromote); err != nil {
			t.Fatal(err)
		}
		e2.waitState(k, "promotion", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	}
	if s := status(e2, checkout); s.CreatedAt != at(0) || s.PhaseSince != at(time.Hour) {
		t.Errorf("promoted: createdAt %q phaseSince %q, want %s and %s", s.CreatedAt, s.PhaseSince, at(0), at(time.Hour))
	}
	if s := status(e2, old); s.CreatedAt != "" || s.PhaseSince != at(time.Hour) {
		t.Errorf("old record promoted: createdAt %q phaseSince %q, want unknown and %s", s.CreatedAt, s.PhaseSince, at(time.Hour))
	}
	e2.drain()
	stored, err := e2.store.LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	_, rs, err := RecordStatus(stored[checkout])
	if err != nil || rs.CreatedAt != at(0) || rs.PhaseSince != at(time.Hour) {
		t.Errorf("RecordStatus of the stored record: %q %q %v", rs.CreatedAt, rs.PhaseSince, err)
	}
}
