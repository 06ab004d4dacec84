package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// The wave tracker of the run across clusters: when each part of each wave
// started, paused and passed, from the status events and list readings.

// partTimes is when one part first showed each stage of the new version.
type partTimes struct {
	cluster                          string
	wave                             int
	started, paused, passed, healthy time.Time
}

// waveTracker records, per part, the first time its status (from the
// event stream, or a poll of the list) showed each stage of version.
type waveTracker struct {
	version string

	mu             sync.Mutex
	parts          map[string]*partTimes
	events, polled int
	// wave1 is what countWave1Canaries found, and when.
	wave1 struct {
		running, want int
		at            time.Time
	}
}

func newWaveTracker(version string) *waveTracker {
	return &waveTracker{version: version, parts: map[string]*partTimes{}}
}

func (w *waveTracker) note(key string, st httpapi.RolloutStatus, at time.Time, polled bool) {
	if st.Wave == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if polled {
		w.polled++
	} else {
		w.events++
	}
	p := w.parts[key]
	if p == nil {
		p = &partTimes{}
		w.parts[key] = p
	}
	p.cluster = st.Wave.Cluster
	p.wave = st.Wave.Wave
	first := func(t *time.Time, ok bool) {
		if ok && (t.IsZero() || at.Before(*t)) {
			*t = at
		}
	}
	inFlight := st.CanaryVersion == w.version && st.Wave.Waiting == ""
	healthy := st.Phase == rollout.PhaseHealthy && st.StableVersion == w.version
	first(&p.started, inFlight || healthy)
	first(&p.paused, inFlight && st.Phase == rollout.PhasePaused && st.StepIndex == 1)
	first(&p.passed, (inFlight && st.Wave.Held) || healthy)
	first(&p.healthy, healthy && st.CanaryVersion == "")
}

// listEvery is how often follow reads the whole list: a list of 3,000
// parts (3 MB of JSON) costs the daemon about 0.2 s of CPU, which a
// 2 s period made 14 % of its CPU during a change.
const listEvery = 10 * time.Second

// follow reads the list every listEvery (for statuses the stream dropped,
// and to see the end) until n parts are Healthy at the version; when wave 1
// is first all Paused it counts the new version's Running pods in wave
// 1's clusters.
func (w *waveTracker) follow(ctx context.Context, c *client.Client, fixtures map[string]*kubeFixture, n int, since time.Time, say func(string, ...any)) error {
	last, listed := time.Now(), time.Time{}
	wave1Checked := false
	return poll(ctx, 2*time.Hour, fmt.Sprintf("%d parts Healthy at %s", n, w.version), func() (bool, string, error) {
		var err error
		if time.Since(listed) >= listEvery {
			var items []httpapi.RolloutStatus
			items, err = c.List(ctx)
			listed = time.Now()
			for _, s := range items {
				w.note(s.Namespace+"/"+s.Name, s, listed, true)
			}
		}
		if !wave1Checked {
			if _, ok := w.waveDone(1, n, func(p *partTimes) time.Time { return p.paused }); ok {
				wave1Checked = true
				w.countWave1Canaries(ctx, fixtures, since)
			}
		}
		done, state := w.summary(n)
		if time.Since(last) > 30*time.Second {
			say("%s", state)
			last = time.Now()
		}
		return done, state, err
	})
}

// waveDone is the latest of stage's times over wave's parts, if every part
// of the wave (known once all n parts have been seen) has it.
func (w *waveTracker) waveDone(wave, n int, stage func(*partTimes) time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.parts) < n {
		return time.Time{}, false
	}
	var latest time.Time
	for _, p := range w.parts {
		if p.wave != wave {
			continue
		}
		t := stage(p)
		if t.IsZero() {
			return time.Time{}, false
		}
		if t.After(latest) {
			latest = t
		}
	}
	return latest, !latest.IsZero()
}

// countWave1Canaries counts, in each cluster of wave 1, the Running pods
// of the new version against wave 1's parts there (one canary pod each).
func (w *waveTracker) countWave1Canaries(ctx context.Context, fixtures map[string]*kubeFixture, since time.Time) {
	want := map[string]int{}
	w.mu.Lock()
	for _, p := range w.parts {
		if p.wave == 1 {
			want[p.cluster]++
		}
	}
	w.mu.Unlock()
	w.wave1.at = time.Now()
	for cluster, n := range want {
		w.wave1.want += n
		k := fixtures[cluster]
		if k == nil {
			continue
		}
		_ = k.listPods(ctx, "", sluiceSelector, func(p *corev1.Pod) {
			if p.Status.Phase == corev1.PodRunning && len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image == w.version {
				w.wave1.running++
			}
		})
	}
}

func (w *waveTracker) summary(n int) (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var started, paused, passed, healthy int
	for _, p := range w.parts {
		for _, s := range []struct {
			t *time.Time
			c *int
		}{{&p.started, &started}, {&p.paused, &paused}, {&p.passed, &passed}, {&p.healthy, &healthy}} {
			if !s.t.IsZero() {
				*s.c++
			}
		}
	}
	return healthy == n, fmt.Sprintf("%d parts seen; started %d, paused %d, passed %d, Healthy at %s %d", len(w.parts), started, paused, passed, w.version, healthy)
}

func (w *waveTracker) fill(res *ClustersResult, since time.Time) {
	// An unseen stage counts as -1.
	secs := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return t.Sub(since).Seconds()
	}
	if t, ok := w.waveDone(1, res.Parts, func(p *partTimes) time.Time { return p.paused }); ok {
		res.Wave1PausedSeconds = secs(t)
	}
	w.mu.Lock()
	res.Wave1CanaryRunning, res.Wave1CanaryWant = w.wave1.running, w.wave1.want
	if !w.wave1.at.IsZero() {
		res.Wave1CanaryRunningSeconds = secs(w.wave1.at)
	}
	waves := map[int]*WaveTime{}
	res.PartsPerCluster = map[string]int{}
	var healthy time.Time
	for _, p := range w.parts {
		res.PartsPerCluster[p.cluster]++
		wt := waves[p.wave]
		if wt == nil {
			wt = &WaveTime{Wave: p.wave, FirstStarted: -1}
			waves[p.wave] = wt
		}
		wt.Parts++
		if !slices.Contains(wt.Clusters, p.cluster) {
			wt.Clusters = append(wt.Clusters, p.cluster)
		}
		if s := secs(p.started); s >= 0 && (wt.FirstStarted < 0 || s < wt.FirstStarted) {
			wt.FirstStarted = s
		}
		wt.AllStarted = max(wt.AllStarted, secs(p.started))
		wt.AllPassed = max(wt.AllPassed, secs(p.passed))
		if p.healthy.After(healthy) {
			healthy = p.healthy
		}
	}
	res.StatusEvents, res.StatusPolled = w.events, w.polled
	w.mu.Unlock()
	res.AllHealthySeconds = secs(healthy)
	for _, wt := range waves {
		sort.Strings(wt.Clusters)
		res.WaveTimes = append(res.WaveTimes, *wt)
	}
	sort.Slice(res.WaveTimes, func(i, j int) bool { return res.WaveTimes[i].Wave < res.WaveTimes[j].Wave })
	if len(res.WaveTimes) > 0 {
		res.Wave1Clusters = res.WaveTimes[0].Clusters
	}
}
