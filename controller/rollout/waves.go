package rollout

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// A multi-cluster rollout runs as one part per cluster (api.WaveSeat on
// each part's spec; key "ns/name@cluster"), each part its own machine.
// The wave order spans parts, so no single machine can keep it. The split
// chosen, as for the canary queue (queue.go): a part only knows its own
// seat; a new canary of a part in wave 2 or later waits in State.WaveWait
// instead of starting, and the part of an earlier wave holds at 100 % once
// its steps are done (with on-wave-failure rollback-all), keeping its old
// stable running. The wave program (Waves, below) looks at every part of a
// rollout and answers with the events that move them on: WaveOpen,
// WaveRelease, WaveFailed. Everything it decides from is in the parts'
// persisted states, so a restart resumes at the same wave and step.

// WaveOpen says the part's wave has opened: its canary waiting for the
// wave starts. Without one it is ignored.
type WaveOpen struct{}

// WaveRelease says every wave has passed: a part holding at 100 % for
// later waves promotes. Otherwise it is ignored.
type WaveRelease struct{}

// WaveFailed says a wave of the rollout failed: a canary waiting for its
// wave never starts, and (on-wave-failure rollback-all) a canary in
// flight or holding at 100 % aborts back to the old stable.
type WaveFailed struct {
	Reason string `json:"reason"`
	// Abort aborts a canary in flight or holding; false (on-wave-failure
	// hold) only cancels a waiting one.
	Abort bool `json:"abort,omitempty"`
}

// ClusterReachability says whether the part's cluster can be reached: a
// canary in flight there holds at its step while it cannot (nothing it
// would do next could be carried out or observed), and goes on once it
// can. Reason says why it cannot.
type ClusterReachability struct {
	Down   bool   `json:"down"`
	Reason string `json:"reason,omitempty"`
}

func (ClusterReachability) isEvent() {}

func (WaveOpen) isEvent()    {}
func (WaveRelease) isEvent() {}
func (WaveFailed) isEvent()  {}

// WaveCancel is a canary that waited for its wave and was dropped because
// a wave failed: its version, commit and why.
type WaveCancel struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Reason  string `json:"reason"`
}

// waitsForWave reports whether a new canary of r must wait for its wave.
func waitsForWave(r *api.Rollout) bool { return r.Wave != nil && r.Wave.Wave > 1 }

// parkForWave keeps a new canary until WaveOpen; the stable keeps all
// traffic. A newer version waiting replaces the older one, and a canary in
// flight is dropped back to stable, as a single-cluster rollout drops it
// for a newer version: the newer one must wait for its wave.
func (m *machine) parkForWave(commit string, r *api.Rollout, ticket uint64) {
	if m.s.CanaryActive() {
		stable := m.s.StableSpec
		if stable == nil {
			stable = m.s.Spec
		}
		m.rollback(m.s.Commit, stable)
	}
	m.s.WaveWait = &Queued{Commit: commit, Rollout: r, Ticket: ticket}
	m.s.WaveCancelled = nil
}

// waveOpened starts the canary that waited for the wave (through the
// canary queue when a limit is in force).
func (m *machine) waveOpened() {
	w := m.s.WaveWait
	if w == nil || m.s.Removed {
		return
	}
	m.s.WaveWait = nil
	if m.needsSlot(w.Ticket) {
		m.queue(w.Commit, w.Rollout, w.Ticket, nil)
		return
	}
	m.newCanary(w.Commit, w.Rollout)
}

// holdsForLaterWaves keeps a part whose steps are done, and whose canary
// is at full size and Ready, at 100 % with the old stable still running,
// until WaveRelease. It reports whether the part holds.
func (m *machine) holdsForLaterWaves() bool {
	seat := m.s.Spec.Wave
	if seat == nil || !seat.HoldAtFull || m.s.WaveReleased {
		return false
	}
	if !m.s.WaveHeld {
		m.s.WaveHeld = true
		if full := api.CanaryWeights(100); m.s.Weights != full {
			m.s.Weights = full
			m.pushTraffic()
		}
		m.alert(AlertRolloutPaused, m.s.Commit, fmt.Sprintf("wave %d/%d passed in %s: %s at 100%%, stable %s kept running until every wave has passed",
			seat.Wave, seat.Waves, seat.Cluster, m.s.CanaryVersion, m.s.StableVersion), "wave")
	}
	return true
}

// waveReleased promotes a part that held for later waves.
func (m *machine) waveReleased() {
	if !m.s.WaveHeld || !m.s.CanaryActive() {
		return
	}
	m.s.WaveHeld = false
	m.s.WaveReleased = true
	m.advance()
}

// waveFailed cancels a waiting canary and, with e.Abort, aborts one in
// flight or holding.
func (m *machine) waveFailed(e WaveFailed) {
	if w := m.s.WaveWait; w != nil {
		m.s.WaveWait = nil
		m.s.WaveCancelled = &WaveCancel{Version: w.Rollout.Version, Commit: w.Commit, Reason: e.Reason}
		return
	}
	if e.Abort && m.s.CanaryActive() {
		m.s.WaveHeld = false
		m.abort(e.Reason)
	}
}

// clusterReachability holds a canary in flight while its cluster cannot
// be reached, and releases that hold once it can.
func (m *machine) clusterReachability(e ClusterReachability) {
	h := m.s.Hold
	switch {
	case e.Down && h == nil && m.s.CanaryActive():
		m.s.Hold = &Hold{Kind: HoldCluster, Reason: e.Reason}
	case e.Down && h != nil && h.Kind == HoldCluster:
		h2 := *h
		h2.Reason = e.Reason
		m.s.Hold = &h2
	case !e.Down && h != nil && h.Kind == HoldCluster:
		m.s.Hold = nil
		m.advance()
	}
}

// clearWave forgets the wave marks of the canary that ends or is replaced.
func (m *machine) clearWave() {
	m.s.WaveHeld = false
	m.s.WaveReleased = false
}

// WavePassed reports whether the part has passed its wave: it holds at
// 100 % with that traffic ACKed, or its version is the stable one at
// 100 % (promoted, ACKed).
func (s State) WavePassed(version string) bool {
	if s.WaveWait != nil || s.Queued != nil || s.Pending != nil {
		return false
	}
	if s.WaveHeld {
		return s.CanaryVersion == version && s.AckedGen >= s.TrafficGen
	}
	return s.CanaryVersion == "" && s.StableVersion == version && s.Settle == nil && s.Wait == nil
}

// WaveVersion is the version the part is rolling out or waits to roll
// out ("" when it has none: stable and nothing waiting).
func (s State) WaveVersion() string {
	switch {
	case s.WaveWait != nil:
		return s.WaveWait.Rollout.Version
	case s.WaveCancelled != nil:
		return s.WaveCancelled.Version
	case s.Queued != nil:
		return s.Queued.Rollout.Version
	case s.Pending != nil:
		return s.Pending.Rollout.Version
	case s.CanaryVersion != "":
		return s.CanaryVersion
	}
	return s.StableVersion
}

// waveMessage is the message of a part waiting for its wave.
func waveMessage(s State) string {
	w, seat := s.WaveWait, s.WaveWait.Rollout.Wave
	return fmt.Sprintf("waiting for wave %d/%d: canary %s from commit %s starts in %s once wave %d has passed; stable %s keeps all traffic",
		seat.Wave, seat.Waves, w.Rollout.Version, short(w.Commit), seat.Cluster, seat.Wave-1, s.StableVersion)
}

// heldMessage is the message of a part holding at 100 % for later waves.
func heldMessage(s State) string {
	seat := s.Spec.Wave
	msg := fmt.Sprintf("wave %d/%d passed in %s: %s at 100%%, stable %s still running until every wave has passed",
		seat.Wave, seat.Waves, seat.Cluster, s.CanaryVersion, s.StableVersion)
	if s.AckedGen < s.TrafficGen {
		msg += " (waiting for the ACK of 100%)"
	}
	return msg
}

// WaveStatus is a part's place in its multi-cluster rollout.
type WaveStatus struct {
	Cluster string `json:"cluster"`
	Wave    int    `json:"wave"`
	Waves   int    `json:"waves"`
	// Reason is why the global layer put the cluster in this wave.
	Reason string `json:"reason,omitempty"`
	// Waiting is the version waiting for the wave to open; Held says the
	// part holds at 100 % for later waves; Cancelled why a waiting
	// canary was dropped.
	Waiting   string `json:"waiting,omitempty"`
	Held      bool   `json:"held,omitempty"`
	Cancelled string `json:"cancelled,omitempty"`
	// Program is where the whole rollout is, across its clusters (the
	// daemon's wave loop adds it): "wave 2/3 (eu-1, us-1) rolling out v2".
	Program string `json:"program,omitempty"`
}

func (s State) waveStatus() *WaveStatus {
	r := s.Spec
	if s.WaveWait != nil {
		r = s.WaveWait.Rollout
	}
	if r == nil || r.Wave == nil {
		return nil
	}
	st := &WaveStatus{Cluster: r.Wave.Cluster, Wave: r.Wave.Wave, Waves: r.Wave.Waves, Reason: r.Wave.Reason,
		Held: s.WaveHeld}
	if c := s.WaveCancelled; c != nil {
		st.Cancelled = c.Reason
	}
	if s.WaveWait != nil {
		st.Waiting = s.WaveWait.Rollout.Version
	}
	return st
}

// WaveInput is what the wave program decides from: every part of one
// multi-cluster rollout, its failure policy and soak, and how long ago
// each wave was first seen passed (the caller keeps the clock and stamps
// the waves WaveOutput.Passed names; after a restart a wave's soak starts
// over, which only waits longer).
type WaveInput struct {
	Parts     []State
	OnFailure string // api.OnWaveFailureRollbackAll or api.OnWaveFailureHold
	Soak      time.Duration
	Since     map[int]time.Duration
	// Unreachable names the clusters the daemon cannot reach, with why: a
	// part there holds at its step, the others in flight go on, and no
	// wave opens or is released while any is (hold, for the rollout as a
	// whole).
	Unreachable map[string]string
}

// WaveEvent is an event for one part.
type WaveEvent struct {
	Key   api.Key
	Event Event
}

// WaveOutput is the wave program's answer: the events to feed, the waves
// that have passed, the wave in flight (0: none), a one-line summary, and
// how soon to look again for a soak to end (0: on the next change).
type WaveOutput struct {
	Events  []WaveEvent
	Passed  []int
	Current int
	Waves   int
	Version string
	Summary string
	WakeIn  time.Duration
}

// Waves is the wave program of one multi-cluster rollout. It is pure:
// the parts' states in, events out. While the parts' versions differ (a
// commit is being applied to them) it waits.
func Waves(in WaveInput) WaveOutput {
	var out WaveOutput
	byWave, ok := partsByWave(in.Parts)
	if !ok {
		return out
	}
	out.Waves = len(byWave)
	out.Version = in.Parts[0].WaveVersion()
	for _, p := range in.Parts {
		if p.WaveVersion() != out.Version {
			out.Summary = "applying a new version to the parts"
			return out
		}
	}
	out.Events = reachabilityEvents(in)
	if failed, reason := firstFailure(byWave, out.Version); failed != nil {
		out.Events = append(out.Events, failureEvents(in, failed, reason)...)
		out.Summary = reason
		return out
	}
	for w := 1; w <= len(byWave); w++ {
		if len(byWave[w-1]) == 0 || !allPassed(byWave[w-1], out.Version) {
			out.Current = w
			break
		}
		out.Passed = append(out.Passed, w)
	}
	if len(in.Unreachable) > 0 {
		out.Summary = waveSummary(in, byWave, out)
		return out
	}
	if out.Current == 0 {
		out.Events = append(out.Events, releaseEvents(in.Parts)...)
		out.Summary = fmt.Sprintf("every wave passed: %s in %d clusters", out.Version, len(in.Parts))
		return out
	}
	var open []WaveEvent
	open, out.WakeIn = openEvents(in, byWave, out.Current)
	out.Events = append(out.Events, open...)
	out.Summary = waveSummary(in, byWave, out)
	return out
}

// reachabilityEvents hold the canaries in flight in unreachable clusters
// and release those whose cluster is back.
func reachabilityEvents(in WaveInput) []WaveEvent {
	var evs []WaveEvent
	for _, p := range in.Parts {
		reason, down := in.Unreachable[seatOf(p).Cluster]
		held := p.Hold != nil && p.Hold.Kind == HoldCluster
		switch {
		case down && p.CanaryActive() && (p.Hold == nil || held && p.Hold.Reason != reason):
			evs = append(evs, WaveEvent{Key: p.Key, Event: ClusterReachability{Down: true, Reason: reason}})
		case !down && held:
			evs = append(evs, WaveEvent{Key: p.Key, Event: ClusterReachability{}})
		}
	}
	return evs
}

// seatOf is the part's seat: that of the canary waiting for its wave, or
// of the spec in force.
func seatOf(s State) *api.WaveSeat {
	if s.WaveWait != nil {
		return s.WaveWait.Rollout.Wave
	}
	if s.Spec == nil {
		return nil
	}
	return s.Spec.Wave
}

// partsByWave groups the parts by wave (index 0 is wave 1); false when a
// part has no seat or the parts disagree on the number of waves. A wave
// may be empty: its parts are not there yet (their cluster is not
// connected), and it cannot pass.
func partsByWave(parts []State) ([][]State, bool) {
	if len(parts) == 0 {
		return nil, false
	}
	var byWave [][]State
	for _, p := range parts {
		seat := seatOf(p)
		if seat == nil || seat.Wave < 1 || seat.Wave > seat.Waves {
			return nil, false
		}
		if byWave == nil {
			byWave = make([][]State, seat.Waves)
		}
		if seat.Waves != len(byWave) {
			return nil, false
		}
		byWave[seat.Wave-1] = append(byWave[seat.Wave-1], p)
	}
	return byWave, true
}

// firstFailure is the first part, by wave, whose canary of version
// aborted, and the reason the other parts are told.
func firstFailure(byWave [][]State, version string) (*State, string) {
	for w, parts := range byWave {
		for i, p := range parts {
			if p.Aborted && p.CanaryVersion == version && !p.Removed {
				return &byWave[w][i], fmt.Sprintf("wave %d failed in %s: %s", w+1, seatOf(p).Cluster, p.AbortReason)
			}
		}
	}
	return nil, ""
}

// failureEvents applies on-wave-failure: a canary waiting for its wave is
// cancelled; with rollback-all every other canary in flight or holding
// aborts back to the old stable.
func failureEvents(in WaveInput, failed *State, reason string) []WaveEvent {
	rollback := in.OnFailure != api.OnWaveFailureHold
	var evs []WaveEvent
	for _, p := range in.Parts {
		if p.Key == failed.Key {
			continue
		}
		if p.WaveWait != nil || (rollback && p.CanaryActive()) {
			evs = append(evs, WaveEvent{Key: p.Key, Event: WaveFailed{Reason: reason + " (on-wave-failure " + in.OnFailure + ")", Abort: rollback}})
		}
	}
	return evs
}

func allPassed(parts []State, version string) bool {
	for _, p := range parts {
		if !p.WavePassed(version) {
			return false
		}
	}
	return true
}

// releaseEvents promotes every part that holds for later waves.
func releaseEvents(parts []State) []WaveEvent {
	var evs []WaveEvent
	for _, p := range parts {
		if p.WaveHeld {
			evs = append(evs, WaveEvent{Key: p.Key, Event: WaveRelease{}})
		}
	}
	return evs
}

// openEvents opens wave current: its waiting parts start once the wave
// before it has soaked. It returns how long the soak has left if it has
// not ended (a wave the caller has not stamped yet soaks from now).
func openEvents(in WaveInput, byWave [][]State, current int) ([]WaveEvent, time.Duration) {
	if current > 1 && in.Soak > 0 {
		if left := in.Soak - in.Since[current-1]; left > 0 {
			return nil, left
		}
	}
	var evs []WaveEvent
	for _, p := range byWave[current-1] {
		if p.WaveWait != nil {
			evs = append(evs, WaveEvent{Key: p.Key, Event: WaveOpen{}})
		}
	}
	return evs, 0
}

// waveSummary says where the rollout is: "wave 2/3 (eu-1, us-1) rolling
// out v2", and which unreachable clusters hold it.
func waveSummary(in WaveInput, byWave [][]State, out WaveOutput) string {
	msg := "every wave passed, waiting to release"
	if out.Current > 0 {
		var clusters []string
		for _, p := range byWave[out.Current-1] {
			clusters = append(clusters, seatOf(p).Cluster)
		}
		if len(clusters) == 0 {
			clusters = []string{"its clusters not connected"}
		}
		msg = fmt.Sprintf("wave %d/%d (%s) rolling out %s", out.Current, out.Waves, strings.Join(clusters, ", "), out.Version)
		if out.WakeIn > 0 {
			msg = fmt.Sprintf("wave %d passed; soaking %s more before wave %d/%d (%s)", out.Current-1, out.WakeIn.Round(second), out.Current, out.Waves, strings.Join(clusters, ", "))
		}
	}
	var down []string
	for _, p := range in.Parts {
		if reason, ok := in.Unreachable[seatOf(p).Cluster]; ok {
			down = append(down, reason)
		}
	}
	if len(down) > 0 {
		msg += "; held, no wave opens while " + strings.Join(down, "; ")
	}
	return msg
}

// second rounds the soak left for the summary (time's own constants are
// out of bounds in this package, see TestNoIO).
const second = time.Duration(1_000_000_000)
