package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
)

// waveRecheck bounds how long a wave program goes unexamined: an update
// the runner dropped (a slow subscriber loses the newest) must not stall
// a wave for good. Every program is run then, so it is rare: at 1,000
// rollouts across 3 clusters, running them all on every part's update and
// every 2 s was a third of sluice's CPU during a change.
const waveRecheck = 30 * time.Second

// waveLoop runs the wave program (rollout.Waves) of a multi-cluster
// rollout whenever one of its parts changes and when its soak ends; every
// program when a cluster's reachability changes, when the set changes,
// and every waveRecheck. It keeps the clock the pure program has not:
// when each wave was first seen passed. After a restart a soak starts
// over.
type waveLoop struct {
	runner *runner.Runner
	log    *slog.Logger
	// unreachable names the clusters that cannot be reached, with why.
	unreachable func() map[string]string

	mu       sync.Mutex
	rollouts map[api.Key]waveRollout
	passed   map[api.Key]passedWaves
	last     map[api.Key]rollout.WaveOutput
	// dirty are the rollouts to look at next (all: every one); wakeAt
	// when a rollout's soak ends.
	dirty  map[api.Key]struct{}
	all    bool
	wakeAt map[api.Key]time.Time
	kick   chan struct{}
}

// waveRollout is a multi-cluster rollout as the last applied set has it.
type waveRollout struct {
	parts     []api.Key
	onFailure string
	soak      time.Duration
}

// passedWaves are the waves of one version seen passed, and when.
type passedWaves struct {
	version string
	at      map[int]time.Time
}

func newWaveLoop(r *runner.Runner, unreachable func() map[string]string, log *slog.Logger) *waveLoop {
	return &waveLoop{runner: r, log: log, unreachable: unreachable, rollouts: map[api.Key]waveRollout{},
		passed: map[api.Key]passedWaves{}, last: map[api.Key]rollout.WaveOutput{},
		dirty: map[api.Key]struct{}{}, wakeAt: map[api.Key]time.Time{}, kick: make(chan struct{}, 1)}
}

// track takes the multi-cluster rollouts of an applied (expanded) set.
func (w *waveLoop) track(set *api.Set) {
	rollouts := map[api.Key]waveRollout{}
	for _, r := range set.Rollouts {
		if r.Wave == nil || r.Placement == nil {
			continue
		}
		parent := r.Key.Parent()
		wr := rollouts[parent]
		wr.parts = append(wr.parts, r.Key)
		wr.onFailure, wr.soak = r.Placement.OnWaveFailure, r.Placement.WaveSoak
		rollouts[parent] = wr
	}
	w.mu.Lock()
	w.rollouts = rollouts
	for parent := range w.last {
		if _, ok := rollouts[parent]; !ok {
			delete(w.passed, parent)
			delete(w.last, parent)
			delete(w.wakeAt, parent)
		}
	}
	w.mu.Unlock()
	w.pokeAll()
}

// poke asks to look at one rollout again; pokes coalesce.
func (w *waveLoop) poke(parent api.Key) {
	w.mu.Lock()
	w.dirty[parent] = struct{}{}
	w.mu.Unlock()
	w.signal()
}

// pokeAll asks to look at every rollout again (a cluster went down or
// came back).
func (w *waveLoop) pokeAll() {
	w.mu.Lock()
	w.all = true
	w.mu.Unlock()
	w.signal()
}

func (w *waveLoop) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run evaluates the wave programs until ctx ends.
func (w *waveLoop) run(ctx context.Context) error {
	updates := w.runner.Subscribe()
	defer updates.Cancel()
	go func() {
		for {
			u, ok := updates.Next(ctx)
			if !ok {
				return
			}
			if u.Key.Cluster() != "" {
				w.poke(u.Key.Parent())
			}
		}
	}()
	recheck := time.NewTicker(waveRecheck)
	defer recheck.Stop()
	soak := time.NewTimer(waveRecheck)
	defer soak.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		case <-soak.C:
		case <-recheck.C:
			w.pokeAll()
		}
		soak.Reset(w.evaluate(time.Now()))
	}
}

// evaluate runs the wave programs asked for (and those whose soak has
// ended) once and feeds their events; it returns how soon the next soak
// ends (waveRecheck when none does sooner).
func (w *waveLoop) evaluate(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	down := w.unreachable()
	for parent, at := range w.wakeAt {
		if !at.After(now) {
			w.dirty[parent] = struct{}{}
			delete(w.wakeAt, parent)
		}
	}
	if w.all {
		for parent := range w.rollouts {
			w.dirty[parent] = struct{}{}
		}
		w.all = false
	}
	for parent := range w.dirty {
		delete(w.dirty, parent)
		wr, ok := w.rollouts[parent]
		if !ok {
			continue
		}
		out := w.decide(parent, wr, now, down)
		for _, e := range out.Events {
			w.runner.Submit(e.Key, e.Event)
		}
		if prev := w.last[parent]; prev.Summary != out.Summary {
			w.log.Info("wave program", "rollout", parent.String(), "wave", out.Current, "waves", out.Waves, "version", out.Version, "summary", out.Summary)
		}
		w.last[parent] = out
		if out.WakeIn > 0 {
			w.wakeAt[parent] = now.Add(out.WakeIn)
		}
	}
	wake := waveRecheck
	for _, at := range w.wakeAt {
		wake = min(wake, at.Sub(now))
	}
	return max(wake, 0)
}

// decide runs one rollout's wave program and stamps the waves it saw
// pass; w.mu is held.
func (w *waveLoop) decide(parent api.Key, wr waveRollout, now time.Time, down map[string]string) rollout.WaveOutput {
	var parts []rollout.State
	for _, k := range wr.parts {
		s, ok := w.runner.State(k)
		if ok {
			parts = append(parts, s)
			continue
		}
		// A part held back until its cluster connects (holdUnconnected)
		// leaves its wave empty, which cannot pass; any other missing
		// part is still being applied.
		if _, unreachable := down[k.Cluster()]; !unreachable {
			return rollout.WaveOutput{Summary: "applying the rollout to its clusters"}
		}
	}
	if len(parts) == 0 {
		return rollout.WaveOutput{Summary: "waiting for its clusters to connect"}
	}
	passed := w.passed[parent]
	version := parts[0].WaveVersion()
	if passed.version != version {
		passed = passedWaves{version: version, at: map[int]time.Time{}}
	}
	since := map[int]time.Duration{}
	for wave, at := range passed.at {
		since[wave] = now.Sub(at)
	}
	out := rollout.Waves(rollout.WaveInput{Parts: parts, OnFailure: wr.onFailure, Soak: wr.soak, Since: since, Unreachable: down})
	for _, wave := range out.Passed {
		if _, ok := passed.at[wave]; !ok {
			passed.at[wave] = now
		}
	}
	w.passed[parent] = passed
	return out
}

// summary is where the multi-cluster rollout is ("" before its first
// evaluation).
func (w *waveLoop) summary(parent api.Key) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[parent].Summary
}
