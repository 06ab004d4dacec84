package rollout

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// source picks numbers: math/rand for the property test, the fuzzer's
// bytes for the fuzz test.
type source interface{ IntN(n int) int }

// byteSource reads choices from fuzz input; when it runs out it gives 0.
type byteSource struct{ b []byte }

func (s *byteSource) IntN(n int) int {
	if len(s.b) == 0 || n <= 1 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	return v % n
}

func (s *byteSource) done() bool { return len(s.b) == 0 }

// genSpecs are the strategies random sequences choose from.
var genSteps = []string{
	"",
	"setWeight 20; pause 30s; analysis sr; setWeight 50; pause",
	"setWeight 10; header testers x-canary=always; pause 1m; mirror shadow 30; setWeight 40; analysis sr+lat; pause",
	"pause; setWeight 100; pause",
	"setWeight 30; setWeight 5; analysis sr; header testers; scale; setWeight 60",
	"analysis sr",
}

// genKubeSteps add setCanaryScale variants for Kubernetes mode.
var genKubeSteps = []string{
	"scale 2; setWeight 10; scale 50%; setWeight 30; scale match; setWeight 60; pause",
	"setWeight 80; pause 1m; setWeight 20; scale 1; setWeight 50; pause",
	"setWeight 20; experiment base:stable,cand:canary 30s cmp=check! other=check2; setWeight 60; pause",
	"experiment cand:canary:2 1m other=check2; setWeight 50; experiment base:stable; pause",
}

// genSpec picks a strategy; in Kubernetes mode (kube) with a pod-template
// hash (sometimes a new one for the same image), replicas, and random
// dynamicStableScale, minPodsPerReplicaSet and progressDeadlineAbort.
func genSpec(src source, kube bool) *api.Rollout {
	kv := map[string]string{
		"version": fmt.Sprintf("v%d", 1+src.IntN(3)),
		"steps":   genSteps[src.IntN(len(genSteps))],
	}
	if src.IntN(2) == 0 {
		kv["bg"] = fmt.Sprintf("er@%d", src.IntN(4))
	}
	if kube {
		kv["hash"] = fmt.Sprintf("%s-%d", kv["version"], src.IntN(2))
		kv["replicas"] = fmt.Sprint(src.IntN(6))
		kv["min"] = fmt.Sprint(src.IntN(3))
		kv["dss"] = fmt.Sprint(src.IntN(2) == 0)
		kv["deadlineAbort"] = fmt.Sprint(src.IntN(2) == 0)
		if src.IntN(2) == 0 {
			kv["baseline"] = "b-" + kv["hash"] // a judged rollout: canaries run beside a baseline
		}
		if src.IntN(2) == 0 {
			kv["steps"] = genKubeSteps[src.IntN(len(genKubeSteps))]
		}
	}
	if src.IntN(4) == 0 {
		genBlueGreen(src, kv)
	}
	r, err := specOf(kv)
	if err != nil {
		panic(err)
	}
	if src.IntN(4) == 0 {
		// A multi-cluster rollout's part (waves.go).
		r.Wave = &api.WaveSeat{Cluster: "c", Wave: 1 + src.IntN(3), Waves: 3, HoldAtFull: src.IntN(2) == 0}
	}
	return r
}

// genBlueGreen makes kv a blue-green rollout: the program
// api/bluegreen.go compiles (preview, prePromotionAnalysis, promotion,
// switch, postPromotionAnalysis; sometimes without the analyses or the
// promotion pause) with a preview host, and none of the canary-only
// fields (dynamicStableScale, a baseline, background analysis).
func genBlueGreen(src source, kv map[string]string) {
	replicas := 4
	if n, ok := kv["replicas"]; ok {
		fmt.Sscan(n, &replicas)
	}
	preview := min(replicas, 1+src.IntN(2))
	steps := fmt.Sprintf("scale %d", preview)
	if src.IntN(2) == 0 {
		steps += "; analysis pre"
	}
	steps += [...]string{"", "; pause", "; pause 30s"}[src.IntN(3)]
	steps += fmt.Sprintf("; setWeight 100 & scale %d", replicas)
	if src.IntN(2) == 0 {
		steps += "; analysis post"
	}
	kv["steps"], kv["preview"] = steps, "preview.checkout.internal"
	for _, canaryOnly := range []string{"dss", "baseline", "bg"} {
		delete(kv, canaryOnly)
	}
}

// genWaveEvent is one of the wave program's events.
func genWaveEvent(src source) Event {
	switch src.IntN(5) {
	case 0:
		return WaveOpen{}
	case 1:
		return WaveRelease{}
	case 2:
		return WaveFailed{Reason: "wave 1 failed in c0", Abort: src.IntN(2) == 0}
	case 3:
		return ClusterReachability{Down: true, Reason: "cluster c unreachable"}
	}
	return ClusterReachability{}
}

var genPhases = []AnalysisPhase{AnalysisRunning, AnalysisSuccessful, AnalysisSuccessful, AnalysisFailed, AnalysisInconclusive, AnalysisError}

var genCommands = []CommandKind{CmdPromote, CmdPromoteFull, CmdAbort, CmdRetry, CmdApprove, CmdPause, CmdResume}

// genEvent picks an event that is likely to matter in state s; in
// Kubernetes mode (kube) also the actuator's PodsReady reports.
func genEvent(src source, s State, n int, kube, queue bool) Event {
	if queue {
		// Under a limit on concurrent canaries (queue.go): changes carry
		// tickets and slots are granted at random. Kept apart so that the
		// sequences without a limit stay as they were.
		switch ev := genEvent(src, s, n, kube, false).(type) {
		case Change:
			if ev.Class != ClassRemoved && src.IntN(4) != 0 {
				ev.Ticket = uint64(n + 1)
			}
			return ev
		case Restart:
			if src.IntN(2) == 0 {
				return SlotGranted{}
			}
			return ev
		default:
			return ev
		}
	}
	switch src.IntN(14) {
	case 11, 12, 13:
		if kube {
			return genPodsReady(src, s)
		}
		return Restart{}
	case 0:
		c := Change{Commit: fmt.Sprintf("c%07d", n), Rollout: genSpec(src, kube)}
		if src.IntN(5) == 0 {
			c.Risky = []string{"weight jump"}
		}
		if src.IntN(12) == 0 {
			c = Change{Commit: c.Commit, Class: ClassRemoved}
		}
		return c
	case 1:
		if src.IntN(4) == 0 {
			return Invalid{Commit: fmt.Sprintf("c%07d", n), Errors: api.Diagnostics{{File: "f.yaml", Line: 1, Message: "bad", Severity: api.SeverityError}}}
		}
		return Restart{}
	case 2, 3:
		gen := s.TrafficGen
		if src.IntN(4) == 0 {
			gen = uint64(src.IntN(int(s.TrafficGen) + 2))
		}
		switch src.IntN(5) {
		case 0:
			return TrafficNacked{Gen: gen, Reason: "nack"}
		case 1:
			return TrafficAckTimeout{Gen: gen}
		}
		return TrafficAcked{Gen: gen}
	case 4:
		id := "pause/0/0"
		var armed []string
		if s.Timer != nil {
			armed = append(armed, s.Timer.ID)
		}
		if s.Wait != nil && s.Wait.Timer != nil {
			armed = append(armed, s.Wait.Timer.ID)
		}
		for _, d := range s.Drains {
			if d.Timer != nil {
				armed = append(armed, d.Timer.ID)
			}
		}
		if len(armed) > 0 && src.IntN(6) != 0 {
			id = armed[src.IntN(len(armed))]
		}
		return TimerFired{ID: id}
	case 5, 6:
		run := s.StepRun
		if src.IntN(3) == 0 {
			run = s.BackgroundRun
		}
		if names := s.experimentRunNames(); len(names) > 0 && src.IntN(2) == 0 {
			run = names[src.IntN(len(names))]
		}
		return AnalysisResult{Run: run, Phase: genPhases[src.IntN(len(genPhases))], Metrics: []MetricStatus{{Name: "m", Value: "1"}}}
	default:
		if src.IntN(3) == 0 {
			return genWaveEvent(src)
		}
		return Command{Kind: genCommands[src.IntN(len(genCommands))]}
	}
}

// genPodsReady reports on one of the sets the machine asked for: mostly
// all Ready, sometimes fewer (pods starting or lost).
func genPodsReady(src source, s State) Event {
	if len(s.Workloads) == 0 {
		return PodsReady{Hash: fmt.Sprintf("v%d-%d", 1+src.IntN(3), src.IntN(2)), Replicas: 1, Ready: int32(src.IntN(2))}
	}
	w := s.Workloads[src.IntN(len(s.Workloads))]
	ready, replicas := w.Desired, w.Desired
	if src.IntN(3) == 0 {
		ready = int32(src.IntN(int(w.Desired) + 1))
		// Pods being created or deleted: more or fewer than desired.
		replicas = max(ready, w.Desired+int32(src.IntN(3))-1)
	}
	return PodsReady{Hash: w.Hash, Replicas: replicas, Ready: ready}
}

// exposure follows, outside the machine, which share of traffic each
// pod-template hash may be getting: the largest over every generation
// pushed that clients may still be using (the newest ACKed one and any
// later; a NACK or an ACK timeout proves nothing).
type exposure struct {
	pushed []SetTraffic
}

func (x *exposure) push(st SetTraffic) { x.pushed = append(x.pushed, st) }

// ack drops the generations every client has moved past: all before the
// newest one at or below gen.
func (x *exposure) ack(gen uint64) {
	var keep []SetTraffic
	for i, st := range x.pushed {
		if st.Gen >= gen || i+1 < len(x.pushed) && x.pushed[i+1].Gen > gen {
			keep = append(keep, st)
		}
	}
	x.pushed = keep
}

func (x *exposure) shares() map[string]int32 {
	out := map[string]int32{}
	for _, st := range x.pushed {
		for _, sh := range trafficShares(st.Traffic) {
			out[sh.Hash] = max(out[sh.Hash], sh.Weight)
		}
	}
	return out
}

// last is the latest pushed traffic's share for hash.
func (x *exposure) last(hash string) int32 {
	if len(x.pushed) == 0 {
		return 0
	}
	for _, sh := range trafficShares(x.pushed[len(x.pushed)-1].Traffic) {
		if sh.Hash == hash {
			return sh.Weight
		}
	}
	return 0
}

// checkPods checks Kubernetes mode's promise for one Step: a hash that
// clients may route a share w to has desired pods for w (so nothing that
// still gets traffic is scaled below its share, and a stable shrinks only
// after the ACK), and a push that raises a hash's share does so only when
// its Ready pods cover the new share. A new version (also one that waited
// in the canary queue) or a rollback moves a
// canary's traffic back to stable at once, as Argo does; that rise is
// exempt (also when the new version waited for its wave). It also checks that one Step emits at most one ScaleWorkloads,
// naming the state's desired sets.
func checkPods(x *exposure, next State, ev Event, acts []Action) error {
	if !next.kubernetes() {
		return nil
	}
	scales := 0
	for _, a := range acts {
		switch a := a.(type) {
		case ScaleWorkloads:
			scales++
			if !reflect.DeepEqual(a.Sets, next.desiredSets()) {
				return fmt.Errorf("ScaleWorkloads %+v differs from the desired sets %+v", a.Sets, next.desiredSets())
			}
		case SetTraffic:
			_, isChange := ev.(Change)
			// A queued new version starting on SlotGranted, or one that
			// waited for its wave on WaveOpen, is a change too.
			_, isGrant := ev.(SlotGranted)
			_, isOpen := ev.(WaveOpen)
			isChange = isChange || isGrant || isOpen || ev == Command{Kind: CmdApprove}
			for _, sh := range trafficShares(a.Traffic) {
				if sh.Weight <= x.last(sh.Hash) || isChange && sh.Hash == next.StableHash {
					continue
				}
				if ready, need := next.pods(sh.Hash).Ready, next.replicasFor(sh.Weight); ready < need {
					return fmt.Errorf("pushed %d%% to %s with %d/%d Ready pods", sh.Weight, sh.Hash, ready, need)
				}
			}
			x.push(a)
		}
	}
	if scales > 1 {
		return fmt.Errorf("%d ScaleWorkloads in one Step", scales)
	}
	if ack, ok := ev.(TrafficAcked); ok && ack.Gen <= next.TrafficGen {
		x.ack(ack.Gen)
	}
	if next.Removed {
		return nil
	}
	for hash, w := range x.shares() {
		if w > 0 && next.desired(hash) < next.replicasFor(w) {
			return fmt.Errorf("%s may get %d%% of traffic but has %d desired pods, needs %d (sets %+v)", hash, w, next.desired(hash), next.replicasFor(w), next.Workloads)
		}
	}
	return nil
}

// setWeights are the weights the steps up to and including index i set.
func setWeights(s State, i int32) map[int32]bool {
	w := map[int32]bool{0: true}
	for j, st := range s.Steps() {
		if int32(j) <= i && st.Kind == api.StepSetWeight {
			w[st.Weight] = true
		}
	}
	return w
}

// checkTransition checks what must hold between two states and the actions
// of the step between them.
func checkTransition(prev, next State, ev Event, acts []Action) error {
	if err := checkInvariants(next); err != nil {
		return err
	}
	if c, ok := ev.(Command); ok && c.Kind == CmdAbort && prev.Allows(CmdAbort) == nil {
		// In Kubernetes mode an abort may first wait for stable pods.
		abortWaits := next.Wait != nil && next.Wait.Kind == WaitAbort
		if !next.Aborted || next.Weights.Canary != 0 && !abortWaits {
			return fmt.Errorf("abort ended at %+v aborted=%v", next.Weights, next.Aborted)
		}
	}
	if err := checkQueue(prev, next, ev, acts); err != nil {
		return err
	}
	if err := checkWaves(prev, next, ev, acts); err != nil {
		return err
	}
	if next.Seq != prev.Seq && next.Seq != prev.Seq+1 {
		return fmt.Errorf("seq jumped %d -> %d", prev.Seq, next.Seq)
	}
	if len(acts) > 0 && next.Seq == prev.Seq {
		return fmt.Errorf("%d actions without a new state to persist first", len(acts))
	}
	// Canary weight rises only by entering a setWeight step, which happens
	// only once the step before it completed.
	sameCanary := prev.CanaryActive() && next.CanaryActive() && prev.CanaryVersion == next.CanaryVersion && prev.Attempt == next.Attempt
	restarted := prev.CanaryVersion != next.CanaryVersion || prev.Attempt != next.Attempt
	// A retry while an abort still waits for stable pods keeps the weight
	// that never moved back (Kubernetes mode).
	if prev.Wait != nil && prev.Wait.Kind == WaitAbort && next.Weights == prev.Weights {
		restarted = false
	}
	// A part holding for later waves is at 100 % once its steps are done.
	heldAtFull := next.WaveHeld && next.Weights.Canary == 100
	if next.CanaryActive() && !heldAtFull && (next.Weights.Canary > prev.Weights.Canary || restarted && next.Weights.Canary > 0) {
		if !setWeights(next, next.StepIndex)[next.Weights.Canary] {
			return fmt.Errorf("canary weight %d is set by no step up to %d", next.Weights.Canary, next.StepIndex)
		}
		_, isChange := ev.(Change)
		isApprove := ev == Command{Kind: CmdApprove}
		entered := (prev.Cursor == CursorEnter || prev.Cursor == CursorAwaitPods) && prev.StepIndex == next.StepIndex
		if sameCanary && next.StepIndex <= prev.StepIndex && !isChange && !isApprove && !entered {
			return fmt.Errorf("canary weight %d -> %d without a completed step (step %d -> %d, %T %v)",
				prev.Weights.Canary, next.Weights.Canary, prev.StepIndex, next.StepIndex, ev, ev)
		}
	}
	// A canary becomes stable only through promotion: all steps done.
	if prev.StableVersion != "" && next.StableVersion != prev.StableVersion {
		// The version the event brings in: a pushed one or an approved one.
		incoming := ""
		if c, ok := ev.(Change); ok && c.Rollout != nil && len(c.Risky) == 0 {
			incoming = c.Rollout.Version
		}
		if ev == (Command{Kind: CmdApprove}) && prev.Pending != nil {
			incoming = prev.Pending.Rollout.Version
		}
		if _, ok := ev.(SlotGranted); ok && prev.Queued != nil {
			incoming = prev.Queued.Rollout.Version
		}
		if _, ok := ev.(WaveOpen); ok && prev.WaveWait != nil {
			incoming = prev.WaveWait.Rollout.Version
		}
		// Pushing the stable version again rolls back; a new version
		// without steps promotes at once.
		rollback := incoming == next.StableVersion && incoming == prev.StableVersion
		noSteps := incoming == next.StableVersion && next.StepCount() == 0
		// A version pushed while the first one still waits for its pods
		// (Kubernetes mode) replaces it: it never got traffic.
		firstReplaced := incoming == next.StableVersion && prev.Wait != nil && prev.Wait.Kind == WaitFirst
		if !rollback && !noSteps && !firstReplaced && (next.StableVersion != prev.CanaryVersion || next.StepIndex != next.StepCount()) {
			return fmt.Errorf("stable %s -> %s at step %d/%d", prev.StableVersion, next.StableVersion, next.StepIndex, next.StepCount())
		}
	}
	var last *SetTraffic
	for _, a := range acts {
		if st, ok := a.(SetTraffic); ok {
			w := st.Traffic.Weights
			if w.Stable+w.Canary+w.Baseline != 100 || w.Canary < 0 || w.Stable < 0 || w.Baseline < 0 || w.Baseline > w.Canary ||
				w.Baseline > 0 && st.Traffic.BaselineWorkload == "" {
				return fmt.Errorf("SetTraffic with weights %+v", w)
			}
			last = &st
		}
	}
	if last != nil && !reflect.DeepEqual(last.Traffic, next.Traffic()) {
		return fmt.Errorf("last SetTraffic %+v differs from state traffic %+v", last.Traffic, next.Traffic())
	}
	return nil
}

// checkWaves checks a multi-cluster part (waves.go): a canary waiting for
// its wave never runs beside another canary in flight and gets no pods
// before the wave opens (a blue-green part creates no preview), a part
// holds at 100 % only with its canary in flight and its steps done, with
// the old stable kept at full size (a blue-green part's blue side, which
// a later wave's failure switches back to), and a wave failure that
// aborts leaves no traffic on the new version unless the abort waits for
// stable pods.
func checkWaves(prev, s State, ev Event, acts []Action) error {
	if s.WaveWait != nil && s.CanaryActive() {
		return fmt.Errorf("canary %s in flight while %s waits for its wave", s.CanaryVersion, s.WaveWait.Rollout.Version)
	}
	if w := s.WaveWait; w != nil {
		if h := specHash(w.Rollout); h != "" && h != s.StableHash && s.desired(h) > prev.desired(h) {
			return fmt.Errorf("%s waits for its wave but its pods grew %d -> %d", w.Rollout.Version, prev.desired(h), s.desired(h))
		}
	}
	if s.WaveHeld && (!s.CanaryActive() || s.StepIndex < s.StepCount()) {
		return fmt.Errorf("holding for later waves at step %d/%d, canary active %v", s.StepIndex, s.StepCount(), s.CanaryActive())
	}
	if s.WaveHeld && s.kubernetes() && !s.workload().DynamicStableScale && s.desired(s.StableHash) < s.Spec.Replicas {
		return fmt.Errorf("holding for later waves with the old stable %s at %d desired pods, want %d", s.StableVersion, s.desired(s.StableHash), s.Spec.Replicas)
	}
	if s.WaveHeld && s.Spec.Strategy == api.StrategyBlueGreen {
		if t := s.Traffic(); t.CanaryVersion != s.CanaryVersion || t.Weights.Canary != 100 || t.PreviewHost == "" {
			return fmt.Errorf("blue-green part holding for later waves: traffic %+v, want the active and preview hosts on %s", t, s.CanaryVersion)
		}
	}
	if f, ok := ev.(WaveFailed); ok && f.Abort && prev.CanaryActive() && !prev.Aborted {
		abortWaits := s.Wait != nil && s.Wait.Kind == WaitAbort
		if !s.Aborted || s.Weights.Canary != 0 && !abortWaits {
			return fmt.Errorf("WaveFailed{Abort} ended at %+v aborted=%v", s.Weights, s.Aborted)
		}
	}
	return nil
}

// checkQueue checks the canary queue: a queued canary holds no slot and
// moves no traffic, and under a limit a new canary takes a slot only
// through SlotGranted.
func checkQueue(prev, next State, ev Event, acts []Action) error {
	if next.Queued != nil && (next.HoldsSlot() || next.Pending != nil || next.Removed) {
		return fmt.Errorf("queued %s while holding a slot=%v, pending=%v, removed=%v", next.Queued.Rollout.Version, next.HoldsSlot(), next.Pending != nil, next.Removed)
	}
	if _, ok := ev.(SlotGranted); ok && prev.Queued == nil && next.Seq != prev.Seq {
		return fmt.Errorf("SlotGranted without a queued canary changed the state")
	}
	c, isChange := ev.(Change)
	if isChange && next.Queued != nil {
		for _, a := range acts {
			if _, ok := a.(SetTraffic); ok {
				return fmt.Errorf("a change that queued pushed traffic")
			}
		}
	}
	limited := isChange && c.Ticket != 0 ||
		ev == Command{Kind: CmdApprove} && prev.Pending != nil && prev.Pending.Ticket != 0
	// A rollout added back after its file was removed takes its own canary
	// back without queueing (documented in queue.go).
	readded := prev.Removed && prev.CanaryVersion != "" && !prev.Aborted
	started := next.HoldsSlot() && !prev.HoldsSlot() && next.CanaryVersion != prev.CanaryVersion && !readded
	if limited && started {
		return fmt.Errorf("%T under a limit started canary %s without a slot (prev canary=%s aborted=%v removed=%v wait=%+v stable=%s; next stable=%s)", ev, next.CanaryVersion, prev.CanaryVersion, prev.Aborted, prev.Removed, prev.Wait, prev.StableVersion, next.StableVersion)
	}
	return nil
}

// roundTrip checks that the state survives the store: JSON out and back
// gives the same JSON.
func roundTrip(s State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		return err
	}
	b2, err := json.Marshal(back)
	if err != nil {
		return err
	}
	if string(b) != string(b2) {
		return fmt.Errorf("state changes through JSON:\n%s\n%s", b, b2)
	}
	return nil
}

// TestProperties replays random event sequences and checks, after every
// event: weights in 0..100 summing to 100, an abort ends at canary 0, no
// forward jump without a completed step, and a state that survives JSON.
func TestProperties(t *testing.T) {
	const sequences, length = 800, 120
	podCountOnly := 0 // steps PodCountOnly let go unstored
	defer func() {
		t.Logf("PodCountOnly steps: %d", podCountOnly)
		if !t.Failed() && podCountOnly < 100 {
			t.Errorf("only %d steps were PodCountOnly: the generator hardly reaches them", podCountOnly)
		}
	}()
	for seed := range uint64(sequences + sequences/2) {
		// The last third of the sequences run under a canary limit.
		queue := seed >= sequences
		src := rand.New(rand.NewPCG(seed, 42))
		kube := seed%2 == 1
		s := State{Key: testKey}
		x := &exposure{}
		var trail []string
		var unsaved *State // the state before a step PodCountOnly let go unstored
		for n := range length {
			ev := genEvent(src, s, n, kube, queue)
			next, acts := Step(s, ev)
			trail = append(trail, fmt.Sprintf("%T%+v", ev, ev))
			err := checkTransition(s, next, ev, acts)
			if err == nil {
				err = checkPods(x, next, ev, acts)
			}
			if err == nil && unsaved != nil {
				err = checkSameDecision(*unsaved, s, next, ev, acts)
			}
			if next.Seq != s.Seq && PodCountOnly(s, next, ev, acts) {
				podCountOnly++
				if unsaved == nil {
					unsaved = &s
				}
				if err == nil {
					err = checkSameDecision(*unsaved, next, State{}, Restart{}, nil)
				}
			} else {
				unsaved = nil
			}
			if err != nil {
				t.Fatalf("seed %d, event %d: %v\nlast events: %v", seed, n, err, trail[max(0, len(trail)-6):])
			}
			if n%10 == 0 {
				if err := roundTrip(next); err != nil {
					t.Fatalf("seed %d, event %d: %v", seed, n, err)
				}
			}
			s = next
		}
	}
}

// FuzzStep drives the machine with event sequences chosen by the fuzzer's
// bytes; nothing may panic and every property must hold.
func FuzzStep(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{0, 0, 1, 0, 0, 2, 3, 3, 4, 0, 5, 1, 7, 2, 7, 3})
	f.Add([]byte("a canary, an abort and a retry: \x00\x01\x02\x07\x07\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{b: data}
		kube := src.IntN(2) == 1
		queue := len(data)%2 == 1 // no byte drawn: the corpus keeps its meaning
		s := State{Key: testKey}
		x := &exposure{}
		for n := 0; !src.done() && n < 500; n++ {
			ev := genEvent(src, s, n, kube, queue)
			next, acts := Step(s, ev)
			err := checkTransition(s, next, ev, acts)
			if err == nil {
				err = checkPods(x, next, ev, acts)
			}
			if err != nil {
				t.Fatalf("event %d %T%+v: %v", n, ev, ev, err)
			}
			s = next
		}
		if err := roundTrip(s); err != nil {
			t.Fatal(err)
		}
	})
}

// checkSameDecision: a state the runner did not store (PodCountOnly since
// stored) decides as the stored one would after a restart: the same event
// gives the same actions from both, and the same state but for the pod
// counts and Seq. cur is the state the machine really had, next and acts
// what ev made of it (acts nil: Step it here).
func checkSameDecision(stored, cur, next State, ev Event, acts []Action) error {
	if acts == nil {
		next, acts = Step(cur, ev)
	}
	fromStored, storedActs := Step(stored, ev)
	if !reflect.DeepEqual(acts, storedActs) {
		return fmt.Errorf("after steps PodCountOnly let go unstored, %T gives %+v, but from the stored state %+v", ev, acts, storedActs)
	}
	if !reflect.DeepEqual(next.withoutPodCounts(), fromStored.withoutPodCounts()) {
		return fmt.Errorf("after steps PodCountOnly let go unstored, %T leads to another state than from the stored one", ev)
	}
	return nil
}
