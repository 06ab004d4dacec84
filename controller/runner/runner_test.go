package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
)

func canarySteps() []api.Step {
	return []api.Step{setWeight(20), pause(30 * time.Millisecond), analysisStep("success-rate"), setWeight(50), pause(0)}
}

// TestCanaryFlow runs a whole canary: v1 stable, v2 through a timed pause
// (a real timer), an analysis step, a final pause, promote; and checks the
// traffic published, the alerts delivered and the updates published.
func TestCanaryFlow(t *testing.T) {
	e := newEnv(t, envOptions{})
	updates := e.runner.Subscribe()
	defer updates.Cancel()

	e.do(checkout, rollout.Change{Commit: "1111111aaa", Rollout: spec(checkout, "v1", canarySteps()...)})
	s := e.waitState(checkout, "v1 healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	if s.StableVersion != "v1" {
		t.Fatalf("after v1: %s %s", s.Phase, s.Message)
	}
	e.do(checkout, rollout.Change{Commit: "2222222bbb", Rollout: spec(checkout, "v2", canarySteps()...)})

	// ACK (immediate) -> pause 30ms (real timer) -> analysis starts.
	e.waitState(checkout, "analysis step", func(s rollout.State) bool { return s.StepRun != "" })
	if tr, _ := e.traffic.last(); tr.Weights != api.CanaryWeights(20) || tr.CanaryVersion != "v2" || tr.Host != "checkout.internal" {
		t.Fatalf("traffic at the analysis step: %+v", tr)
	}
	s, _ = e.runner.State(checkout)
	eventually(t, "analysis run started", func() bool { return len(e.analyzer.runs()) == 1 })
	if got := e.analyzer.runs(); got[0] != s.StepRun {
		t.Fatalf("started runs %v, step run %q", got, s.StepRun)
	}
	if !e.analyzer.report(s.StepRun, rollout.AnalysisSuccessful, "") {
		t.Fatal("no report func for the step run")
	}
	s = e.waitState(checkout, "final pause", func(s rollout.State) bool { return s.StepIndex == 4 && s.Phase == rollout.PhasePaused })
	if s.Weights != api.CanaryWeights(50) {
		t.Fatalf("weights at final pause %+v", s.Weights)
	}

	st, err := e.runner.Command(context.Background(), checkout, rollout.CmdPromote)
	if err != nil {
		t.Fatal(err)
	}
	if st.StableVersion != "v2" || st.CanaryVersion != "" || st.Weights != api.CanaryWeights(0) {
		t.Fatalf("after promote: %+v", st)
	}
	e.waitState(checkout, "promotion settled", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	if tr, _ := e.traffic.last(); tr.StableVersion != "v2" || tr.Weights != api.CanaryWeights(0) || len(tr.HeaderRoutes) != 0 {
		t.Fatalf("traffic after promote: %+v", tr)
	}
	for _, id := range []string{
		"default/checkout/2222222/started",
		"default/checkout/2222222/step-completed/1",
		"default/checkout/2222222/paused/4",
		"default/checkout/2222222/completed",
	} {
		eventually(t, "alert "+id, func() bool { return e.hook.has(id) })
	}
	// The changes were published in order up to the current one (a
	// subscriber that reads late gets the newest; subscribe_test.go).
	var last uint64
	read, stop := context.WithCancel(context.Background())
	stop() // take what is pending without waiting
	eventually(t, "the current state published", func() bool {
		for {
			u, ok := updates.Next(read)
			if !ok {
				break
			}
			if u.Key == checkout && u.Seq <= last {
				t.Fatalf("update seq %d after %d", u.Seq, last)
			}
			last = u.Seq
		}
		s, _ := e.runner.State(checkout)
		return last == s.Seq
	})
}

// TestPersistBeforeActions checks that when the gateway is asked for
// traffic, the state asking for it is already on disk.
func TestPersistBeforeActions(t *testing.T) {
	e := newEnv(t, envOptions{})
	var mu sync.Mutex
	var mismatches []string
	checked := 0
	e.traffic.mu.Lock()
	e.traffic.onSet = func(tr api.Traffic) error {
		stored, err := e.store.LoadRollouts()
		if err != nil {
			return err
		}
		rec, err := decodeRecord(stored[tr.Rollout])
		mu.Lock()
		defer mu.Unlock()
		checked++
		if err != nil || rec.State.Weights != tr.Weights || rec.State.Traffic().CanaryVersion != tr.CanaryVersion {
			mismatches = append(mismatches, fmt.Sprintf("traffic %+v, stored %+v (%v)", tr.Weights, rec.State.Weights, err))
		}
		return nil
	}
	e.traffic.mu.Unlock()
	e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", setWeight(10), setWeight(30), pause(0))})
	e.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", setWeight(10), setWeight(30), pause(0))})
	e.waitState(checkout, "final pause", func(s rollout.State) bool { return s.StepIndex == 2 })
	e.do(checkout, rollout.Command{Kind: rollout.CmdAbort})
	mu.Lock()
	defer mu.Unlock()
	if checked < 4 || len(mismatches) > 0 {
		t.Fatalf("checked %d publishes; mismatches: %v", checked, mismatches)
	}
}

// TestRestart stops a runner in the middle of a pause and in the middle of
// an analysis step and starts a new one on the same state directory: the
// rollout continues at the same step with the same weights, the timer and
// the unfinished run are re-armed, and no alert is lost or sent twice.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	hook := newWebhook(t)
	steps := []api.Step{setWeight(20), pause(time.Hour), analysisStep("success-rate"), setWeight(40), pause(150 * time.Millisecond)}

	e1 := newEnv(t, envOptions{dir: dir, hook: hook})
	e1.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
	e1.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
	before := e1.waitState(checkout, "the 1h pause", func(s rollout.State) bool { return s.Timer != nil })
	e1.drain()
	e1.close()

	// Restart in the pause: same step, same weights, timer re-armed.
	e2 := newEnv(t, envOptions{dir: dir, hook: hook})
	after := e2.waitState(checkout, "restart processed", func(s rollout.State) bool { return s.Seq > before.Seq })
	if after.StepIndex != before.StepIndex || after.Weights != before.Weights || after.Timer == nil || after.Timer.ID != before.Timer.ID {
		t.Fatalf("before %d %+v %v, after %d %+v %v", before.StepIndex, before.Weights, before.Timer, after.StepIndex, after.Weights, after.Timer)
	}
	// The state is published before its actions run: wait for the push.
	eventually(t, "the restart's traffic", func() bool { _, n := e2.traffic.last(); return n > 0 })
	if tr, n := e2.traffic.last(); n != 1 || tr.Weights != before.Weights {
		t.Fatalf("restart pushed %d traffic, last %+v", n, tr.Weights)
	}
	if _, err := e2.runner.Command(context.Background(), checkout, rollout.CmdPromote); err != nil {
		t.Fatal(err)
	}
	inRun := e2.waitState(checkout, "analysis step", func(s rollout.State) bool { return s.StepRun != "" })
	e2.drain()
	e2.close()

	// Restart in the analysis step: the unfinished run starts again under
	// the same name; a verdict moves on.
	e3 := newEnv(t, envOptions{dir: dir, hook: hook})
	eventually(t, "run restarted", func() bool { r := e3.analyzer.runs(); return len(r) == 1 && r[0] == inRun.StepRun })
	e3.analyzer.report(inRun.StepRun, rollout.AnalysisSuccessful, "")
	e3.waitState(checkout, "timed final pause", func(s rollout.State) bool { return s.StepIndex == 4 && s.Timer != nil })
	e3.drain()
	e3.close()

	// Restart after the run finished: never re-run; the 150ms timer fires
	// after the restart and the canary completes.
	e4 := newEnv(t, envOptions{dir: dir, hook: hook})
	done := e4.waitState(checkout, "promotion", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	if done.StableVersion != "v2" {
		t.Fatalf("stable %s", done.StableVersion)
	}
	if r := e4.analyzer.runs(); len(r) != 0 {
		t.Fatalf("finished run started again: %v", r)
	}
	eventually(t, "completed alert", func() bool { return hook.has("default/checkout/2222222/completed") })
	seen := map[string]int{}
	for _, id := range hook.ids() {
		seen[id]++
		if seen[id] > 1 {
			t.Errorf("alert %s delivered twice", id)
		}
	}
}

// TestTimerDeadlineSurvivesRestart: a pause re-armed after a restart waits
// only for the time left. The runners' clocks are set by the test; the
// timers are real.
func TestTimerDeadlineSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	hook := newWebhook(t)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	steps := []api.Step{setWeight(20), pause(time.Hour), setWeight(60), pause(0)}

	e1 := newEnv(t, envOptions{dir: dir, hook: hook, now: func() time.Time { return t0 }})
	e1.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
	e1.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
	s := e1.waitState(checkout, "the 1h pause", func(s rollout.State) bool { return s.Timer != nil })
	e1.drain()
	e1.close()

	// Ten minutes later: the stored deadline is still t0+1h.
	e2 := newEnv(t, envOptions{dir: dir, hook: hook, now: func() time.Time { return t0.Add(10 * time.Minute) }})
	e2.waitState(checkout, "restart", func(n rollout.State) bool { return n.Seq > s.Seq })
	e2.drain()
	stored, err := e2.store.LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeRecord(stored[checkout])
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Deadlines[s.Timer.ID]; !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("deadline %v, want %v", got, t0.Add(time.Hour))
	}
	e2.close()

	// Two hours later: the pause is over, the canary moves on at once.
	e3 := newEnv(t, envOptions{dir: dir, hook: hook, now: func() time.Time { return t0.Add(2 * time.Hour) }})
	got := e3.waitState(checkout, "the pause to end", func(s rollout.State) bool { return s.StepIndex == 3 })
	if got.Weights != api.CanaryWeights(60) {
		t.Fatalf("weights %+v", got.Weights)
	}
}

// TestAlertsReplayedAfterCrash writes what a process that died right after
// persisting leaves behind, a state with alerts not yet in the outbox, and
// checks the next start delivers them.
func TestAlertsReplayedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	hook := newWebhook(t)
	e1 := newEnv(t, envOptions{dir: dir, hook: hook})
	e1.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", setWeight(50), pause(0))})
	s := e1.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", setWeight(50), pause(0))})
	e1.drain()
	e1.close()

	lost := rollout.Alert{ID: "default/checkout/2222222/aborted/1", Event: rollout.AlertRolloutAborted, Severity: rollout.SeverityError,
		Rollout: "default/checkout", Version: "v2", Commit: "2222222", Reason: "analysis failed", Weights: api.CanaryWeights(0)}
	b, err := encodeRecord(record{State: s, Alerts: []rollout.Alert{lost}, Time: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveRollout(checkout, b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := newEnv(t, envOptions{dir: dir, hook: hook})
	eventually(t, "replayed alert", func() bool { return hook.has(lost.ID) })
	e3.drain()
	e3.close()
}

// TestNoAnalyzer: without an analysis engine an analysis step pauses with
// "analysis engine not available" instead of passing.
func TestNoAnalyzer(t *testing.T) {
	e := newEnv(t, envOptions{noAnalyzer: true})
	steps := []api.Step{setWeight(10), analysisStep("success-rate"), setWeight(90)}
	e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
	e.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
	s := e.waitState(checkout, "paused analysis", func(s rollout.State) bool { return s.Hold != nil })
	if s.Phase != rollout.PhasePaused || !strings.Contains(s.Message, NoAnalyzerMessage) || s.Weights != api.CanaryWeights(10) {
		t.Fatalf("got %s %+v %q", s.Phase, s.Weights, s.Message)
	}
}

// TestAcks: the step's window waits for the ACK; a NACK holds the canary
// (and alerts); an ACK timeout lets it go on and says so.
func TestAcks(t *testing.T) {
	tests := []struct {
		mode    string
		phase   rollout.Phase
		step    int32
		message string
	}{
		{"nack", rollout.PhasePaused, 0, "xDS NACK"},
		{"block", rollout.PhasePaused, 1, "xDS ACK timed out"},
		// A router that took the traffic but cannot verify it: the step
		// goes on at once (no ACK timeout) and the status says why.
		{"unverified", rollout.PhasePaused, 1, "(istio: weight unverified: no status)"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			e := newEnv(t, envOptions{ackTimeout: 100 * time.Millisecond})
			steps := []api.Step{setWeight(10), pause(time.Hour)}
			e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
			e.traffic.setMode(tt.mode)
			e.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
			s := e.waitState(checkout, tt.message, func(s rollout.State) bool { return strings.Contains(s.Message, tt.message) && s.Phase == tt.phase })
			if s.Phase != tt.phase || s.StepIndex != tt.step {
				t.Fatalf("got %s step %d: %s", s.Phase, s.StepIndex, s.Message)
			}
			if tt.mode == "nack" {
				eventually(t, "xds-nack alert", func() bool { return e.hook.has("default/checkout/2222222/xds-nack/2") })
			}
		})
	}
}

// TestCommandErrors: unknown rollouts and commands that do not apply.
func TestCommandErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if _, err := e.runner.Command(ctx, checkout, rollout.CmdPromote); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown rollout: %v", err)
	}
	e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", setWeight(10))})
	e.waitState(checkout, "v1 healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })
	st, err := e.runner.Command(ctx, checkout, rollout.CmdAbort)
	if !errors.Is(err, rollout.ErrNotAllowed) || st.Phase != rollout.PhaseHealthy {
		t.Fatalf("abort when healthy: %v %s", err, st.Phase)
	}
	if got := e.runner.List(); len(got) != 1 || got[0].Name != "checkout" {
		t.Fatalf("list %+v", got)
	}
}

// failingStore fails saves of one rollout.
type failingStore struct {
	Store
	bad api.Key
}

func (f failingStore) SaveRollout(k api.Key, b []byte) error {
	if k == f.bad {
		return errors.New("disk full")
	}
	return f.Store.SaveRollout(k, b)
}

// TestIsolation: a rollout whose events panic or whose state cannot be
// persisted never stops the others, and acts on nothing it did not persist.
func TestIsolation(t *testing.T) {
	bad := api.Key{Namespace: "default", Name: "bad"}
	panicky := api.Key{Namespace: "default", Name: "panicky"}
	e := newEnv(t, envOptions{storeWrap: func(s Store) Store { return failingStore{Store: s, bad: bad} }})
	e.traffic.mu.Lock()
	e.traffic.onSet = func(tr api.Traffic) error {
		if tr.Rollout == panicky {
			panic("gateway exploded")
		}
		return nil
	}
	e.traffic.mu.Unlock()

	ctx := context.Background()
	if _, err := e.runner.Do(ctx, bad, rollout.Change{Commit: "1", Rollout: spec(bad, "v1")}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("bad store: %v", err)
	}
	if _, err := e.runner.Do(ctx, panicky, rollout.Change{Commit: "1", Rollout: spec(panicky, "v1")}); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("panicky: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			k := api.Key{Namespace: "team", Name: fmt.Sprintf("r%02d", i)}
			e.do(k, rollout.Change{Commit: "1111111", Rollout: spec(k, "v1", setWeight(10), setWeight(20))})
			e.do(k, rollout.Change{Commit: "2222222", Rollout: spec(k, "v2", setWeight(10), setWeight(20))})
		})
	}
	wg.Wait()
	for i := range 20 {
		k := api.Key{Namespace: "team", Name: fmt.Sprintf("r%02d", i)}
		e.waitState(k, k.String()+" promoted", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy && s.StableVersion == "v2" })
	}
	if _, ok := e.runner.State(bad); ok {
		t.Fatal("unpersisted state became visible")
	}
	e.traffic.mu.Lock()
	for _, tr := range e.traffic.sets {
		if tr.Rollout == bad {
			t.Error("traffic published for a state that was not persisted")
		}
	}
	e.traffic.mu.Unlock()
	// The panicking rollout still takes events.
	if _, err := e.runner.Do(ctx, panicky, rollout.Invalid{Commit: "2", Errors: api.Diagnostics{{File: "f.yaml", Message: "bad", Severity: api.SeverityError}}}); err != nil {
		t.Fatalf("panicky after panic: %v", err)
	}
}

// flakyStore fails the first failures saves of a state for which match holds.
type flakyStore struct {
	Store
	match    func(rollout.State) bool
	mu       sync.Mutex
	failures int
	tries    int
}

func (f *flakyStore) SaveRollout(k api.Key, b []byte) error {
	rec, err := decodeRecord(b)
	if err != nil {
		return err
	}
	if f.match(rec.State) {
		f.mu.Lock()
		f.tries++
		bad := f.tries <= f.failures
		f.mu.Unlock()
		if bad {
			return errors.New("i/o error")
		}
	}
	return f.Store.SaveRollout(k, b)
}

// TestPersistRetry: an internal event (here the ACK of the canary's 20 %)
// whose state cannot be saved is retried with back-off, never lost.
func TestPersistRetry(t *testing.T) {
	var flaky *flakyStore
	e := newEnv(t, envOptions{storeWrap: func(s Store) Store {
		flaky = &flakyStore{Store: s, failures: 2, match: func(s rollout.State) bool {
			return s.CanaryVersion == "v2" && s.StepIndex == 1
		}}
		return flaky
	}})
	steps := []api.Step{setWeight(20), pause(time.Hour)}
	e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
	e.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
	s := e.waitState(checkout, "the pause after the retried ACK", func(s rollout.State) bool { return s.Timer != nil })
	if s.StepIndex != 1 || s.Weights != api.CanaryWeights(20) {
		t.Fatalf("step %d weights %+v", s.StepIndex, s.Weights)
	}
	flaky.mu.Lock()
	defer flaky.mu.Unlock()
	if flaky.tries != 3 {
		t.Fatalf("the ACK's state was saved on try %d, want 3", flaky.tries)
	}
}

// TestClose: Close lets the event in progress finish (its state is
// persisted and acted on), answers queued calls with ErrClosed, and
// refuses new ones.
func TestClose(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	e.traffic.mu.Lock()
	e.traffic.onSet = func(api.Traffic) error {
		entered <- struct{}{}
		<-release // a slow gateway
		return nil
	}
	e.traffic.mu.Unlock()
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := e.runner.Do(ctx, checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1")})
		first <- err
	}()
	<-entered
	queued := make(chan error, 1)
	go func() {
		_, err := e.runner.Do(ctx, checkout, rollout.Invalid{Commit: "2", Errors: api.Diagnostics{{Message: "bad", Severity: api.SeverityError}}})
		queued <- err
	}()
	eventually(t, "second event queued", func() bool {
		e.runner.mu.Lock()
		defer e.runner.mu.Unlock()
		return len(e.runner.rollouts[checkout].queue) == 1
	})
	closed := make(chan struct{})
	go func() {
		_ = e.runner.Close()
		close(closed)
	}()
	if err := <-queued; !errors.Is(err, ErrClosed) {
		t.Fatalf("queued call: %v", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while an event was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if err := <-first; err != nil {
		t.Fatalf("event in progress: %v", err)
	}
	if _, err := e.runner.Do(ctx, checkout, rollout.Restart{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	stored, err := e.store.LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeRecord(stored[checkout])
	if err != nil || rec.State.StableVersion != "v1" {
		t.Fatalf("stored %+v %v", rec.State, err)
	}
}

// TestSettlesOnlyOnAck: a promotion is not Healthy, and rollout-completed
// is not sent, until the clients ACK the 100 % routes; an abort is not
// Degraded until then either. A user who scales the old version down on
// "Healthy" must never drop requests.
func TestSettlesOnlyOnAck(t *testing.T) {
	tests := []struct {
		name    string
		cmd     rollout.CommandKind
		settled rollout.Phase
		alert   string // sent only once settled; "" for none
	}{
		{"promotion", rollout.CmdPromoteFull, rollout.PhaseHealthy, "default/checkout/2222222/completed"},
		{"abort", rollout.CmdAbort, rollout.PhaseDegraded, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{ackTimeout: time.Hour})
			steps := []api.Step{setWeight(10), pause(time.Hour)}
			e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
			e.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
			e.waitState(checkout, "timed pause", func(s rollout.State) bool { return s.Timer != nil })

			e.traffic.setMode("gate")
			if _, err := e.runner.Command(context.Background(), checkout, tt.cmd); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the ACK wait started", func() bool { return e.traffic.waitingCount() == 1 })
			st, _ := e.runner.State(checkout)
			if st.Phase != rollout.PhaseProgressing || !strings.Contains(st.Message, "waiting for xDS clients to ACK") || st.Weights != api.CanaryWeights(0) {
				t.Fatalf("before the ACK: %s %q %+v", st.Phase, st.Message, st.Weights)
			}
			if tt.alert != "" && e.hook.has(tt.alert) {
				t.Fatalf("%s sent before the clients ACKed", tt.alert)
			}

			e.traffic.release()
			settled := e.waitState(checkout, "settled", func(s rollout.State) bool { return s.Phase == tt.settled })
			if settled.Settle != nil || strings.Contains(settled.Message, "waiting") {
				t.Fatalf("after the ACK: %+v %q", settled.Settle, settled.Message)
			}
			if tt.alert != "" {
				eventually(t, "alert "+tt.alert, func() bool { return e.hook.has(tt.alert) })
			}
		})
	}
}

// TestGaugesAgreeWithStatus: /metrics reads Gauges, which must give what
// each rollout's Status says, in every phase.
func TestGaugesAgreeWithStatus(t *testing.T) {
	e := newEnv(t, envOptions{})
	paused := api.Key{Namespace: "shop", Name: "paused"}
	e.do(paused, rollout.Change{Commit: "1111111", Rollout: spec(paused, "v1", setWeight(30), pause(0))})
	e.do(paused, rollout.Change{Commit: "2222222", Rollout: spec(paused, "v2", setWeight(30), pause(0))})
	e.waitState(paused, "paused at 30", func(s rollout.State) bool { return s.StepIndex == 1 })
	aborted := api.Key{Namespace: "shop", Name: "aborted"}
	e.do(aborted, rollout.Change{Commit: "1111111", Rollout: spec(aborted, "v1", setWeight(20), pause(0))})
	e.do(aborted, rollout.Change{Commit: "2222222", Rollout: spec(aborted, "v2", setWeight(20), pause(0))})
	e.waitState(aborted, "paused", func(s rollout.State) bool { return s.StepIndex == 1 })
	if _, err := e.runner.Command(context.Background(), aborted, rollout.CmdAbort); err != nil {
		t.Fatal(err)
	}
	// Aborted is set at once; the phase turns Degraded only once the
	// traffic is back on stable (a read before saw it Progressing).
	e.waitState(aborted, "aborted, Degraded", func(s rollout.State) bool { return s.Aborted && s.Phase == rollout.PhaseDegraded })
	healthy := api.Key{Namespace: "web", Name: "healthy"}
	e.do(healthy, rollout.Change{Commit: "1111111", Rollout: spec(healthy, "v1", setWeight(10))})
	e.waitState(healthy, "Healthy", func(s rollout.State) bool { return s.Phase == rollout.PhaseHealthy })

	gauges := map[api.Key]rollout.Gauges{}
	for _, g := range e.runner.Gauges() {
		gauges[g.Key] = g
	}
	list := e.runner.List()
	if len(list) != 3 || len(gauges) != 3 {
		t.Fatalf("List has %d rollouts, Gauges %d; want 3", len(list), len(gauges))
	}
	phases := map[rollout.Phase]bool{}
	for _, st := range list {
		g := gauges[api.Key{Namespace: st.Namespace, Name: st.Name}]
		if g.Phase != st.Phase || g.Weights != st.Weights || g.StepIndex != st.StepIndex {
			t.Errorf("%s/%s: gauges %+v, status says phase %s weights %+v step %d", st.Namespace, st.Name, g, st.Phase, st.Weights, st.StepIndex)
		}
		phases[st.Phase] = true
	}
	if len(phases) != 3 {
		t.Errorf("phases %v: want three different ones (Paused, Degraded, Healthy)", phases)
	}
}
