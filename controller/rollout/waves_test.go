package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// waveWorld runs the parts of one multi-cluster rollout through the
// machine: traffic is ACKed at once, timers fire when told, and the wave
// program's events are fed back until it has nothing more to say. It is
// the daemon's wave loop without its I/O.
type waveWorld struct {
	t      *testing.T
	parts  map[api.Key]State
	keys   []api.Key
	timers map[api.Key][]Timer
	since  map[int]time.Duration
	policy string
	soak   time.Duration
	// started records the order in which parts started canaries.
	started []string
}

func newWaveWorld(t *testing.T, policy string, waves ...[]string) *waveWorld {
	w := &waveWorld{t: t, parts: map[api.Key]State{}, timers: map[api.Key][]Timer{}, since: map[int]time.Duration{}, policy: policy}
	for i, clusters := range waves {
		for _, c := range clusters {
			key := testKey.InCluster(c)
			w.keys = append(w.keys, key)
			w.feed(key, Change{Commit: "c1", Class: ClassAdded, Rollout: w.spec(key, c, i+1, len(waves), "v1")})
		}
	}
	return w
}

func (w *waveWorld) spec(key api.Key, cluster string, wave, waves int, version string) *api.Rollout {
	return &api.Rollout{Key: key, Version: version,
		Steps: []api.Step{{Kind: api.StepSetWeight, Weight: 50}, {Kind: api.StepPause, Pause: &api.Pause{Duration: time.Minute}}},
		XDS:   &api.XDSConfig{Host: cluster + ".checkout.internal", Endpoints: map[string][]string{"v1": {"127.0.0.1:1"}, "v2": {"127.0.0.1:2"}}},
		Wave:  &api.WaveSeat{Cluster: cluster, Wave: wave, Waves: waves, HoldAtFull: w.policy == api.OnWaveFailureRollbackAll && wave < waves},
	}
}

// feed steps one part and carries out its actions the way the runner
// would, ACKing traffic at once.
func (w *waveWorld) feed(key api.Key, ev Event) {
	next, acts := Step(w.parts[key], ev)
	w.parts[key] = next
	for _, a := range acts {
		switch a := a.(type) {
		case SetTraffic:
			defer w.feed(key, TrafficAcked{Gen: a.Gen})
		case StartTimer:
			w.timers[key] = append(w.timers[key], a.Timer)
		case Notify:
			if a.Alert.Event == AlertRolloutStarted {
				w.started = append(w.started, key.Cluster())
			}
		}
	}
}

// newVersion pushes version to every part (one commit).
func (w *waveWorld) newVersion(version string) {
	for _, key := range w.keys {
		seat := w.parts[key].Spec.Wave
		w.feed(key, Change{Commit: "c-" + version, Class: "NewVersion", Rollout: w.spec(key, seat.Cluster, seat.Wave, seat.Waves, version)})
	}
}

// program runs the wave program until it answers no event, and returns
// its last output.
func (w *waveWorld) program() WaveOutput {
	for range 20 {
		var parts []State
		for _, k := range w.keys {
			parts = append(parts, w.parts[k])
		}
		out := Waves(WaveInput{Parts: parts, OnFailure: w.policy, Soak: w.soak, Since: w.since})
		for _, p := range out.Passed {
			if _, ok := w.since[p]; !ok {
				w.since[p] = 0
			}
		}
		if len(out.Events) == 0 {
			return out
		}
		for _, e := range out.Events {
			w.feed(e.Key, e.Event)
		}
	}
	w.t.Fatal("the wave program does not settle")
	return WaveOutput{}
}

// fire fires the pending timers of the parts in clusters.
func (w *waveWorld) fire(clusters ...string) {
	for _, c := range clusters {
		key := testKey.InCluster(c)
		timers := w.timers[key]
		w.timers[key] = nil
		for _, tm := range timers {
			w.feed(key, TimerFired{ID: tm.ID})
		}
	}
}

func (w *waveWorld) state(cluster string) State { return w.parts[testKey.InCluster(cluster)] }

// describe is "cluster: stable/canary weight phase" for every part.
func (w *waveWorld) describe() string {
	var lines []string
	for _, k := range w.keys {
		s := w.parts[k]
		lines = append(lines, fmt.Sprintf("%s: stable=%s canary=%s weight=%d %s", k.Cluster(), s.StableVersion, s.CanaryVersion, s.Weights.Canary, s.Phase))
	}
	return strings.Join(lines, "\n")
}

func TestWavesPassInOrder(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"eu-2"}, []string{"eu-1", "us-1"}, []string{"us-2"})
	w.newVersion("v2")
	out := w.program()
	if out.Current != 1 || !slices.Equal(w.started, []string{"eu-2"}) {
		t.Fatalf("after the commit: wave %d, started %v, want wave 1 and eu-2 only\n%s", out.Current, w.started, w.describe())
	}
	if s := w.state("eu-1"); s.WaveWait == nil || s.Weights.Canary != 0 || !strings.HasPrefix(s.Message, "waiting for wave 2/3") {
		t.Fatalf("eu-1 should wait for wave 2 with no canary traffic: %+v", s.Message)
	}
	w.fire("eu-2") // the pause ends: eu-2 holds at 100 % for later waves
	if s := w.state("eu-2"); !s.WaveHeld || s.Weights.Canary != 100 || s.StableVersion != "v1" || s.Phase != PhasePaused {
		t.Fatalf("eu-2 should hold at 100%% with stable v1 kept: %s", w.describe())
	}
	if err := w.state("eu-2").Allows(CmdPromote); err == nil {
		t.Fatal("an operator promote must not skip the later waves")
	}
	out = w.program()
	if out.Current != 2 || !slices.Equal(w.started, []string{"eu-2", "eu-1", "us-1"}) {
		t.Fatalf("wave 2 should have started: wave %d, started %v", out.Current, w.started)
	}
	w.fire("eu-1")
	if out = w.program(); out.Current != 2 {
		t.Fatalf("wave 2 has a part in flight (us-1), but the program is at wave %d", out.Current)
	}
	w.fire("us-1")
	out = w.program()
	if out.Current != 3 || w.state("us-2").CanaryVersion != "v2" {
		t.Fatalf("wave 3 should have started: %d\n%s", out.Current, w.describe())
	}
	w.fire("us-2")
	out = w.program()
	if out.Current != 0 {
		t.Fatalf("every wave passed, but the program is at wave %d: %s", out.Current, out.Summary)
	}
	for _, c := range []string{"eu-2", "eu-1", "us-1", "us-2"} {
		if s := w.state(c); s.StableVersion != "v2" || s.CanaryVersion != "" || s.Phase != PhaseHealthy {
			t.Errorf("%s not promoted: %s", c, w.describe())
		}
	}
}

func TestWaveFailureRollsBackEarlierWaves(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"a"}, []string{"b", "c"}, []string{"d"})
	w.newVersion("v2")
	w.program()
	w.fire("a")
	w.program() // wave 2 starts
	w.feed(testKey.InCluster("b"), Command{Kind: CmdAbort})
	out := w.program()
	if !strings.Contains(out.Summary, "wave 2 failed in b") {
		t.Fatalf("summary: %q", out.Summary)
	}
	for _, c := range []string{"a", "b", "c"} {
		if s := w.state(c); !s.Aborted || s.Weights.Canary != 0 || s.StableVersion != "v1" {
			t.Errorf("%s should be back on stable v1 with no canary traffic:\n%s", c, w.describe())
		}
	}
	if s := w.state("d"); s.WaveWait != nil || s.CanaryVersion != "" || !strings.Contains(s.Message, "never started: wave 2 failed in b") {
		t.Errorf("d must never start: %q", s.Message)
	}
	if !strings.Contains(w.state("a").AbortReason, "on-wave-failure rollback-all") {
		t.Errorf("a's abort reason should name the policy: %q", w.state("a").AbortReason)
	}
}

func TestWaveFailureHoldKeepsEarlierWaves(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureHold, []string{"a"}, []string{"b", "c"}, []string{"d"})
	w.newVersion("v2")
	w.program()
	w.fire("a")
	if s := w.state("a"); s.WaveHeld || s.StableVersion != "v2" {
		t.Fatalf("with hold, wave 1 promotes at once: %s", w.describe())
	}
	w.program()
	w.feed(testKey.InCluster("b"), Command{Kind: CmdAbort})
	w.program()
	if s := w.state("a"); s.StableVersion != "v2" || s.Aborted {
		t.Errorf("a must stay on v2: %s", w.describe())
	}
	if s := w.state("c"); !s.CanaryActive() {
		t.Errorf("c, in the failed wave, goes on with hold: %s", w.describe())
	}
	w.fire("c")
	w.program()
	if s := w.state("d"); s.CanaryVersion != "" || s.StableVersion != "v1" || s.WaveCancelled == nil {
		t.Errorf("d must never start: %s %q", w.describe(), s.Message)
	}
}

func TestWaveSoak(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"a"}, []string{"b"})
	w.soak = 10 * time.Minute
	w.newVersion("v2")
	w.program()
	w.fire("a")
	out := w.program()
	if out.WakeIn != 10*time.Minute || w.state("b").WaveWait == nil || !strings.Contains(out.Summary, "soaking 10m0s more") {
		t.Fatalf("wave 2 must wait for the soak: wake in %s, %q", out.WakeIn, out.Summary)
	}
	w.since[1] = 4 * time.Minute
	if out = w.program(); out.WakeIn != 6*time.Minute {
		t.Fatalf("6m of soak left, got %s", out.WakeIn)
	}
	w.since[1] = 10 * time.Minute
	if w.program(); w.state("b").CanaryVersion != "v2" {
		t.Fatalf("the soak is over: b should run v2: %s", w.describe())
	}
}

// TestWavesWaitForOneVersion: while a commit is applied to some parts
// only, the program does nothing.
func TestWavesWaitForOneVersion(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"a"}, []string{"b"})
	key := testKey.InCluster("b")
	seat := w.parts[key].Spec.Wave
	w.feed(key, Change{Commit: "c2", Class: "NewVersion", Rollout: w.spec(key, seat.Cluster, seat.Wave, seat.Waves, "v2")})
	if out := w.program(); len(out.Events) != 0 || out.Current != 0 || out.Summary == "" {
		t.Fatalf("mixed versions: %+v", out)
	}
}

// TestWavesUnreachableCluster: a part in an unreachable cluster holds at
// its step with the reason; the other part of its wave goes on; no later
// wave opens until the cluster is back.
func TestWavesUnreachableCluster(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"a"}, []string{"b", "c"}, []string{"d"})
	w.newVersion("v2")
	w.program()
	w.fire("a")
	w.program() // wave 2 starts
	const why = "cluster b unreachable since 12:03:04: connection refused"
	parts := func() []State {
		var out []State
		for _, k := range w.keys {
			out = append(out, w.parts[k])
		}
		return out
	}
	run := func(down map[string]string) WaveOutput {
		out := Waves(WaveInput{Parts: parts(), OnFailure: w.policy, Since: w.since, Unreachable: down})
		for _, e := range out.Events {
			w.feed(e.Key, e.Event)
		}
		return out
	}
	out := run(map[string]string{"b": why})
	if h := w.state("b").Hold; h == nil || h.Kind != HoldCluster || h.Reason != why || !strings.Contains(w.state("b").Message, why) {
		t.Fatalf("b should hold with the reason: %+v %q", h, w.state("b").Message)
	}
	if !strings.Contains(out.Summary, why) {
		t.Errorf("summary %q should name the unreachable cluster", out.Summary)
	}
	w.fire("b", "c")
	run(map[string]string{"b": why})
	if s := w.state("b"); s.StepIndex != 1 || s.WaveHeld {
		t.Errorf("b moved on while its cluster was unreachable: step %d held %v", s.StepIndex, s.WaveHeld)
	}
	if s := w.state("c"); !s.WaveHeld {
		t.Errorf("c, reachable, should have gone on to hold at 100%%: %s", s.Message)
	}
	if s := w.state("d"); s.WaveWait == nil {
		t.Errorf("d must not start while b is unreachable")
	}
	run(nil) // b is back
	if s := w.state("b"); s.Hold != nil || !s.WaveHeld {
		t.Errorf("b should go on once reachable: hold %+v, %s", s.Hold, s.Message)
	}
	if out := w.program(); out.Current != 3 || w.state("d").CanaryVersion != "v2" {
		t.Errorf("wave 3 should start: %d, %s", out.Current, w.describe())
	}
}

// TestWaveNewerVersionWaitsAgain: a newer version reaching a part of a
// later wave while its canary is in flight drops that canary back to
// stable and waits for its wave; a part holding at 100 % starts it at once
// (wave 1) with its wave marks cleared.
func TestWaveNewerVersionWaitsAgain(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"a"}, []string{"b"})
	w.newVersion("v2")
	w.program()
	w.fire("a")
	w.program() // b runs v2
	if s := w.state("b"); s.CanaryVersion != "v2" || s.Weights.Canary != 50 {
		t.Fatalf("b should run v2 at 50%%: %s", w.describe())
	}
	w.newVersion("v3")
	if s := w.state("b"); s.CanaryVersion != "" || s.Weights.Canary != 0 || s.WaveWait == nil || s.WaveWait.Rollout.Version != "v3" {
		t.Fatalf("b should be back on stable v1, v3 waiting: %s", w.describe())
	}
	if s := w.state("a"); s.WaveHeld || s.CanaryVersion != "v3" || s.Weights.Canary != 50 {
		t.Fatalf("a should run v3 from its first step, no longer held: %s", w.describe())
	}
	w.fire("a")
	w.program()
	w.fire("b")
	if out := w.program(); out.Current != 0 || w.state("a").StableVersion != "v3" || w.state("b").StableVersion != "v3" {
		t.Fatalf("v3 should be everywhere: %s", w.describe())
	}
}

// TestWavesMissingPart: a part not there yet (its cluster never
// connected) leaves its wave empty: earlier waves go on, it never passes,
// and no later wave opens.
func TestWavesMissingPart(t *testing.T) {
	w := newWaveWorld(t, api.OnWaveFailureRollbackAll, []string{"a"}, []string{"b"}, []string{"c"})
	w.newVersion("v2")
	missing := testKey.InCluster("b")
	w.keys = slices.DeleteFunc(w.keys, func(k api.Key) bool { return k == missing })
	down := map[string]string{"b": "cluster b: not connected yet"}
	var parts []State
	for _, k := range w.keys {
		parts = append(parts, w.parts[k])
	}
	w.fire("a")
	parts[0] = w.state("a")
	out := Waves(WaveInput{Parts: parts, OnFailure: w.policy, Since: map[int]time.Duration{1: time.Hour}, Unreachable: down})
	if out.Current != 2 || len(out.Events) != 0 || !strings.Contains(out.Summary, "wave 2/3 (its clusters not connected)") {
		t.Fatalf("wave 2 has no part: %+v", out)
	}
}
