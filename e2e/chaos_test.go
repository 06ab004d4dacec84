package e2e

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// The chaos matrix (issue 26, item 6): one canary driven through its life
// and, at each point of it, one fault, in each mode. Whatever sluice does
// after the fault, it is judged from outside: real gRPC xDS clients record
// which version answered every call, the cluster's ReplicaSets are read
// (Kubernetes), and sluice's status only says where the rollout claims to
// be. docs/operations.md "Chaos matrix" holds the table of the last full
// run.
//
// SLUICE_CHAOS=full runs every cell (`make chaos`); otherwise a short
// subset (chaosShort) runs with the rest of the package.

type (
	chaosMode  string
	chaosPoint string
	chaosFault string
)

const (
	modeStandalone chaosMode = "standalone"
	modeKubeBbolt  chaosMode = "Kubernetes, bbolt"
	modeKubeStore  chaosMode = "Kubernetes, cluster store"

	pointFirst     chaosPoint = "before the first weight"
	pointPods      chaosPoint = "waiting for canary pods"
	pointUnacked   chaosPoint = "weight pushed, before its ACK"
	pointAnalysis  chaosPoint = "during an analysis"
	pointPaused    chaosPoint = "paused"
	pointPromoting chaosPoint = "promoting, before the ACK of 100 %"
	pointScaleDown chaosPoint = "during the scale-down delay"
	pointAborting  chaosPoint = "aborting, before the ACK of 0 %"

	faultKill     chaosFault = "SIGKILL + restart"
	faultWipe     chaosFault = "SIGKILL + wipe + restart"
	faultFailover chaosFault = "SIGKILL of the leader"
)

var (
	chaosModes  = []chaosMode{modeStandalone, modeKubeBbolt, modeKubeStore}
	chaosPoints = []chaosPoint{pointFirst, pointPods, pointUnacked, pointAnalysis, pointPaused, pointPromoting, pointScaleDown, pointAborting}
)

// chaosCell is one run: a fresh world, a canary driven to point, fault.
type chaosCell struct {
	mode  chaosMode
	point chaosPoint
	fault chaosFault
}

func (c chaosCell) name() string {
	return strings.NewReplacer(" ", "_", ",", "", "%", "pct").Replace(fmt.Sprintf("%s/%s/%s", c.mode, c.point, c.fault))
}

// chaosShort is the subset `make test` runs: the standalone faults at the
// points where a restart could move traffic on (a weight not ACKed yet, a
// promotion before its ACK) or lose the position (the final pause), and
// the Kubernetes wipes that once scaled the stable version down under
// traffic.
var chaosShort = []chaosCell{
	{modeStandalone, pointUnacked, faultKill},
	{modeStandalone, pointPaused, faultWipe},
	{modeStandalone, pointPromoting, faultWipe},
	{modeKubeBbolt, pointPods, faultWipe},      // the original outage: v1 scaled 4 → 0 in 0.6 s
	{modeKubeBbolt, pointScaleDown, faultWipe}, // the old stable kept for a whole delay
}

// chaosMatrix is every cell that exists: points without pods (waiting for
// them, the scale-down delay) are Kubernetes only, and only the cluster
// store runs a leader with a follower (--leader-elect needs it).
func chaosMatrix() []chaosCell {
	var cells []chaosCell
	for _, m := range chaosModes {
		for _, p := range chaosPoints {
			if m == modeStandalone && (p == pointPods || p == pointScaleDown) {
				continue
			}
			faults := []chaosFault{faultKill, faultWipe}
			if m == modeKubeStore {
				faults = append(faults, faultFailover)
			}
			for _, f := range faults {
				cells = append(cells, chaosCell{m, p, f})
			}
		}
	}
	return cells
}

// The canary: a first weight, a timed pause, a second weight, an analysis
// (a web metric the test serves), and a pause for `sluice promote`.
const (
	chaosName  = "chaos"
	chaosHost  = "chaos.e2e"
	chaosSteps = `- setWeight: 20
- pause: {duration: 2s}
- setWeight: 50
- analysis:
    templates: [{templateName: chaos-success}]
- pause: {}
`
	chaosAnalysisStep = 3
	chaosFinalStep    = 4
	// chaosScaleDownDelay is the old stable's scaleDownDelaySeconds: long
	// enough for a fault and a restart to land inside it.
	chaosScaleDownDelay = 15 * time.Second
	chaosReplicas       = 4
)

// chaosWeightAt is the canary weight step index i stands for once entered.
func chaosWeightAt(i int32) int32 {
	if i < 2 {
		return 20
	}
	return 50
}

// TestChaosMatrix runs the chaos matrix (short subset unless
// SLUICE_CHAOS=full) and logs its table.
func TestChaosMatrix(t *testing.T) {
	t.Parallel()
	cells := chaosShort
	if os.Getenv("SLUICE_CHAOS") == "full" {
		cells = chaosMatrix()
	}
	began := time.Now()
	var mu sync.Mutex
	results := map[chaosCell]string{}
	t.Cleanup(func() {
		var b strings.Builder
		b.WriteString("| mode | point | fault | outcome |\n|---|---|---|---|\n")
		for _, c := range cells {
			mu.Lock()
			r, ok := results[c]
			mu.Unlock()
			if !ok {
				continue // not selected by -run
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.mode, c.point, c.fault, r)
		}
		mu.Lock()
		ran := len(results)
		mu.Unlock()
		t.Logf("chaos matrix, %d cells in %v:\n%s", ran, time.Since(began).Round(time.Second), b.String())
	})
	for _, cell := range cells {
		t.Run(cell.name(), func(t *testing.T) {
			t.Parallel()
			w := newChaosWorld(t, cell)
			r := w.run()
			if t.Failed() {
				r = "**FAILED**: " + r
			}
			mu.Lock()
			results[cell] = r
			mu.Unlock()
		})
	}
}

// chaosSys is sluice as a cell runs it: one process, or a leader and a
// follower.
type chaosSys interface {
	// status is the rollout's status from the process serving it.
	status(key string) (httpapi.RolloutStatus, bool)
	// xdsAddr is where clients connect (stable across restarts).
	xdsAddr() string
	// leaderXDS is the xDS address of the process that decides (where a
	// client must be to hold a step's ACK).
	leaderXDS() string
	cli(args ...string)
	// inject applies the fault and returns once a process serves again.
	inject(f chaosFault)
	// logs is the stderr of every process started at or after start n
	// (n from starts()).
	logs(n int) string
	starts() int
}

// chaosBefore is where the rollout stood when the fault hit.
type chaosBefore struct {
	st       httpapi.RolloutStatus
	allowed  int32 // the highest canary weight it was entitled to
	promoted time.Time
	settled  time.Time // the promotion was seen Healthy (scale-down point)
	aborted  bool
	at       time.Time // the fault
}

// chaosWorld is one cell's sluice, git repository, clients and observers.
type chaosWorld struct {
	t       *testing.T
	cell    chaosCell
	key     string
	sys     chaosSys
	repo    *gitRepo
	files   func(version string, ready bool) map[string]string
	canary  string // the canary's commit
	pushed  time.Time
	calls   *callLog
	watch   *routeWatch
	polls   *statusLog
	sets    *replicaSetLog // Kubernetes only
	started int            // sys.starts() before the fault
}

func newChaosWorld(t *testing.T, cell chaosCell) *chaosWorld {
	metric := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"successRate": 1}`)
	}))
	t.Cleanup(metric.Close)
	w := &chaosWorld{t: t, cell: cell, repo: newGitRepo(t)}
	switch cell.mode {
	case modeStandalone:
		w.startStandalone(metric.URL)
	default:
		w.startKube(metric.URL)
	}
	w.polls = startStatusLog(t, w.sys, w.key)
	w.polls.wait(t, 90*time.Second, "v1 stable", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	lg, calls := startLoggedLoad(t, probe.LoadOptions{XDSServer: w.sys.xdsAddr(), Host: chaosHost, Clients: 2, Rate: 150, NodePrefix: "chaos"})
	if _, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v1); err != nil {
		t.Fatal(err)
	}
	w.calls = calls
	// The route watch ACKs until a cell withholds its ACK; it is on the
	// process that decides, which waits for it.
	w.watch = watchRoutes(t, w.sys.leaderXDS(), chaosHost)
	return w
}

func (w *chaosWorld) startStandalone(metricURL string) {
	b1, b2 := startBackend(w.t, v1, 0), startBackend(w.t, v2, 0)
	spec := rolloutSpec{Name: chaosName, Host: chaosHost, Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc}, Steps: chaosSteps}
	w.key = "default/" + chaosName
	w.files = func(version string, _ bool) map[string]string {
		spec.Version = version
		return map[string]string{"rollouts/chaos.yaml": spec.yaml(), "analysis/web.yaml": webTemplate("chaos-success", metricURL)}
	}
	w.repo.push("v1", w.files(v1, true))
	w.sys = startChaosSingle(w.t, w.repo, nil)
}

// run drives the canary to the cell's point, injects the fault and judges
// what follows; it returns the table's cell.
func (w *chaosWorld) run() string {
	t := w.t
	w.pushed = time.Now()
	w.canary = w.repo.push("v2", w.files(v2, w.cell.point != pointPods))
	before := w.reach()
	w.started = w.sys.starts()
	before.at = time.Now()
	w.sys.inject(w.cell.fault)
	outcome, at := w.outcome(before)
	took := at.Sub(before.at)
	// Keep watching a moment after the outcome: the clients' share of
	// that time is judged too.
	time.Sleep(2 * time.Second)
	w.checkClientsKeptCalling(before, at.Add(2*time.Second))
	end := w.judgedUntil(before, at.Add(2*time.Second))
	w.checkTraffic(before, end)
	w.checkNeverHealthy(before)
	if w.sets != nil {
		w.checkStableKept(before, end)
		if before.aborted {
			w.checkAbortedCanaryKept(before, end)
		}
	}
	t.Logf("%s at %s (step %d, %d %%), %s: %s in %v", w.cell.mode, w.cell.point, before.st.StepIndex+1, before.st.Weights.Canary, w.cell.fault, outcome, took.Round(100*time.Millisecond))
	return fmt.Sprintf("%s; %.1f s", outcome, took.Seconds())
}

// reach drives the canary to the cell's point and returns what it was
// entitled to there. Each point is reached from the status and the route
// watch, and the fault follows the read at once.
func (w *chaosWorld) reach() chaosBefore {
	t := w.t
	atStep := func(step int32, phase rollout.Phase) httpapi.RolloutStatus {
		return w.polls.wait(t, 90*time.Second, fmt.Sprintf("step %d %s", step, phase), func(s httpapi.RolloutStatus) bool {
			return s.Commit == w.canary && s.CanaryVersion == v2 && s.StepIndex == step && (phase == "" || s.Phase == phase)
		})
	}
	switch w.cell.point {
	case pointFirst:
		// At once after the push: sluice fetches every 500 ms, so the
		// fault lands before it applied the new commit or while it did.
		return chaosBefore{allowed: 20}
	case pointPods:
		// The canary's pods never become Ready (kwok holds them): the
		// first step waits for them with the canary at 0 %.
		st := w.polls.wait(t, 60*time.Second, "waiting for canary pods", func(s httpapi.RolloutStatus) bool {
			return s.Commit == w.canary && s.CanaryVersion == v2 && strings.Contains(s.Message, "waiting for canary pods")
		})
		return chaosBefore{st: st, allowed: 0}
	case pointUnacked:
		atStep(1, "")
		st := w.withheld(50, "")
		return chaosBefore{st: st, allowed: 50}
	case pointAnalysis:
		st := w.polls.waitFresh(t, 90*time.Second, "analysis running", func(s httpapi.RolloutStatus) bool {
			return s.Commit == w.canary && s.StepIndex == chaosAnalysisStep &&
				slices.ContainsFunc(s.AnalysisRuns, func(r rollout.RunStatus) bool { return r.Phase == rollout.AnalysisRunning })
		})
		return chaosBefore{st: st, allowed: 50}
	case pointPaused:
		st := atStep(chaosFinalStep, rollout.PhasePaused)
		return chaosBefore{st: st, allowed: 50}
	case pointPromoting:
		atStep(chaosFinalStep, rollout.PhasePaused)
		promoted := time.Now()
		st := w.withheld(100, "promote")
		return chaosBefore{st: st, allowed: 100, promoted: promoted}
	case pointScaleDown:
		atStep(chaosFinalStep, rollout.PhasePaused)
		promoted := time.Now()
		w.sys.cli("promote", w.key)
		st := w.polls.waitFresh(t, 60*time.Second, "promotion settled", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
		})
		return chaosBefore{st: st, allowed: 100, promoted: promoted, settled: time.Now()}
	case pointAborting:
		atStep(chaosFinalStep, rollout.PhasePaused)
		st := w.withheld(0, "abort")
		return chaosBefore{st: st, allowed: 50, aborted: true}
	}
	t.Fatalf("unknown point %q", w.cell.point)
	return chaosBefore{}
}

// withheld stops the route watch's ACKs, runs the command (none: the
// rollout moves by itself), and waits until the watch is sent new routes:
// the change is pushed and its ACK withheld. The weight is what the
// change must give the canary (checked when the route names it).
func (w *chaosWorld) withheld(weight uint32, command string) httpapi.RolloutStatus {
	t := w.t
	t.Helper()
	w.watch.withhold.Store(true)
	from := time.Now()
	if command != "" {
		w.sys.cli(command, w.key)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		splits, err := w.watch.seen()
		for i, s := range splits {
			if i == 0 || !s.at.After(from) || maps.Equal(s.weights, splits[i-1].weights) {
				continue
			}
			if got, ok := s.weights[w.key+"/canary"]; ok && got != weight {
				t.Fatalf("the change gave the canary %d %%, want %d %%: %v", got, weight, s.weights)
			}
			st, _ := w.sys.status(w.key)
			return st
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the route watch was sent no new routes within 60s (%v); splits %v", err, splits)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outcome waits for the rollout after the fault to show one of the
// outcomes the cell allows and names it; any other end fails the cell.
func (w *chaosWorld) outcome(before chaosBefore) (string, time.Time) {
	t := w.t
	t.Helper()
	wipe := w.cell.fault == faultWipe
	deadline := time.Now().Add(90 * time.Second)
	var last httpapi.RolloutStatus
	for time.Now().Before(deadline) {
		st, ok := w.sys.status(w.key)
		if !ok || st.Commit != w.canary {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		last = st
		now := time.Now()
		recovered := strings.Contains(w.sys.logs(w.started), "rollout recovered after a state loss")
		held := st.Phase == rollout.PhasePaused && strings.Contains(st.Message, "after a state loss")
		step := st.StepIndex + 1
		switch {
		case held && st.CanaryVersion == v2:
			if !wipe {
				t.Errorf("held as recovered after a %s, which loses no state: %q", w.cell.fault, st.Message)
			}
			if st.StepIndex > before.st.StepIndex && before.promoted.IsZero() {
				t.Errorf("recovered at step %d, past step %d where the fault hit", step, before.st.StepIndex+1)
			}
			if before.aborted && w.sets != nil {
				t.Errorf("the aborted canary came back held at step %d, %d %%: the abort was lost with the record (%q)", step, st.Weights.Canary, st.Message)
			}
			return fmt.Sprintf("held at step %d, %d %% (recovered)", step, st.Weights.Canary), now
		case before.aborted && st.Aborted && st.StableVersion == v1:
			if recovered && wipe {
				return fmt.Sprintf("stayed aborted at step %d, 0 %% (recovered from the %s)", step, recoveredFrom(w.sys.logs(w.started))), now
			}
			return "stayed aborted, 0 %", now
		case !before.promoted.IsZero() && st.Phase == rollout.PhaseHealthy && st.StableVersion == v2:
			return "promotion completed", now
		case st.CanaryVersion == v2 && recovered && wipe:
			if before.aborted && w.sets != nil {
				t.Errorf("the aborted canary runs again from step 1 after a wipe: the abort was lost with the record (%q)", st.Message)
			}
			return fmt.Sprintf("re-runs from step 1 (recovered from %s)", recoveredFrom(w.sys.logs(w.started))), now
		case st.CanaryVersion == v2 && !before.aborted && before.promoted.IsZero() && st.StepIndex >= before.st.StepIndex:
			if wipe {
				return fmt.Sprintf("continued at step %d", step), now
			}
			return fmt.Sprintf("continued at step %d, %d %%", step, st.Weights.Canary), now
		case st.CanaryVersion == v2 && !wipe && st.StepIndex < before.st.StepIndex:
			t.Errorf("step %d after a %s, was %d: went back with its state intact", step, w.cell.fault, before.st.StepIndex+1)
			return fmt.Sprintf("went back to step %d", step), now
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("no allowed outcome within 90s of the fault; last status: %s step %d, stable %q canary %q, weights %v, aborted %v: %q",
		last.Phase, last.StepIndex+1, last.StableVersion, last.CanaryVersion, last.Weights, last.Aborted, last.Message)
	return fmt.Sprintf("stuck: %s step %d: %s", last.Phase, last.StepIndex+1, last.Message), time.Now()
}

// recoveredFrom is the source the daemon's log names for its recovery.
func recoveredFrom(logs string) string {
	for _, src := range []string{"cluster", "git"} {
		if strings.Contains(logs, `"source":"`+src+`"`) {
			return src
		}
	}
	return "?"
}

// judgedUntil is when the share of the clients stops being judged against
// the fault's bound: at until, or sooner where the rollout legitimately
// moved past the fault's step (a timed pause or an analysis that passed
// again after it).
func (w *chaosWorld) judgedUntil(before chaosBefore, until time.Time) time.Time {
	for _, p := range w.polls.since(before.at) {
		s := p.st
		if p.at.Before(until) && s.Commit == w.canary && s.CanaryVersion == v2 && s.StepIndex > before.st.StepIndex {
			return p.at
		}
	}
	return until
}

// checkClientsKeptCalling fails the cell when the clients made too few
// calls from the fault to until (at least 2 s, at 150 calls/s): a verdict
// on traffic nobody sent would prove nothing. It counts the whole window,
// also what follows a legitimate move past the step, which checkTraffic
// leaves out.
func (w *chaosWorld) checkClientsKeptCalling(before chaosBefore, until time.Time) {
	n := 0
	for _, a := range w.calls.since(before.at) {
		if a.Started.Before(until) {
			n++
		}
	}
	if n < 50 {
		w.t.Errorf("only %d calls between the fault and %v later: the clients stopped", n, until.Sub(before.at).Round(time.Millisecond))
	}
}

// checkTraffic judges every call from the fault to end: no run of calls
// may show the canary above the weight the rollout was entitled to, beyond
// the binomial noise of the run (4 standard deviations), and none may
// fail.
func (w *chaosWorld) checkTraffic(before chaosBefore, end time.Time) {
	t := w.t
	t.Helper()
	var calls []probe.Answer
	for _, a := range w.calls.since(before.at) {
		if a.Started.Before(end) {
			calls = append(calls, a)
		}
	}
	tl := tally(calls)
	if tl.failed > 0 || tl.noVersion > 0 {
		t.Errorf("after the fault %d calls failed and %d found no backend (of %d); first failure: %s", tl.failed, tl.noVersion, len(calls), firstFailure(calls))
	}
	t.Logf("clients from the fault to %v later: %d calls, %d answered by v1, %d by v2 (the last started %s after the fault), %d failed",
		end.Sub(before.at).Round(100*time.Millisecond), len(calls), tl.answered[v1], tl.answered[v2], lastAnswer(calls, v2, before.at), tl.failed+tl.noVersion)
	if before.allowed >= 100 {
		return
	}
	p := float64(before.allowed) / 100
	const run = 200
	for i := 0; i < len(calls); i += run {
		chunk := calls[i:min(i+run, len(calls))]
		n, canary := 0, 0
		for _, a := range chunk {
			if a.Err == nil && a.Version != "" {
				n++
				if a.Version == v2 {
					canary++
				}
			}
		}
		if n < 20 {
			continue
		}
		share := float64(canary) / float64(n)
		if bound := p + 4*math.Sqrt(p*(1-p)/float64(n)); share > bound {
			t.Errorf("calls %d–%d after the fault (from %v on): canary share %.3f of %d, above the %d %% the rollout was entitled to (bound %.3f)",
				i, i+len(chunk), chunk[0].Started.Sub(before.at).Round(time.Millisecond), share, n, before.allowed, bound)
			return // the first run over the bound says it
		}
	}
}

// checkNeverHealthy: the canary's version may be Healthy only after
// `sluice promote` was given.
func (w *chaosWorld) checkNeverHealthy(before chaosBefore) {
	for _, p := range w.polls.since(time.Time{}) {
		if p.st.Phase == rollout.PhaseHealthy && p.st.StableVersion == v2 && (before.promoted.IsZero() || p.at.Before(before.promoted)) {
			w.t.Errorf("Healthy on the canary's version %v after the push without `sluice promote` (step %d)", p.at.Round(time.Millisecond), p.st.StepIndex+1)
			return
		}
	}
}

// statusLog polls sluice's status every 50 ms and keeps every read.
type statusLog struct {
	mu    sync.Mutex
	reads []statusRead
}

type statusRead struct {
	at time.Time
	st httpapi.RolloutStatus
}

func startStatusLog(t *testing.T, sys chaosSys, key string) *statusLog {
	l := &statusLog{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if st, ok := sys.status(key); ok {
				l.mu.Lock()
				l.reads = append(l.reads, statusRead{at: time.Now(), st: st})
				l.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return l
}

func (l *statusLog) since(from time.Time) []statusRead {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.reads, from, func(r statusRead, t time.Time) int { return r.at.Compare(t) })
	return slices.Clone(l.reads[i:])
}

// wait returns the first read (from the start) for which cond holds.
func (l *statusLog) wait(t *testing.T, within time.Duration, what string, cond func(httpapi.RolloutStatus) bool) httpapi.RolloutStatus {
	return l.waitFrom(t, time.Time{}, within, what, cond)
}

// waitFresh returns the first read from now on for which cond holds.
func (l *statusLog) waitFresh(t *testing.T, within time.Duration, what string, cond func(httpapi.RolloutStatus) bool) httpapi.RolloutStatus {
	return l.waitFrom(t, time.Now(), within, what, cond)
}

func (l *statusLog) waitFrom(t *testing.T, from time.Time, within time.Duration, what string, cond func(httpapi.RolloutStatus) bool) httpapi.RolloutStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	seen := 0
	var last httpapi.RolloutStatus
	for {
		reads := l.since(from)
		for _, r := range reads[seen:] {
			last = r.st
			if cond(r.st) {
				return r.st
			}
		}
		seen = len(reads)
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; last status: %s step %d, stable %q canary %q, weights %v: %q",
				what, within, last.Phase, last.StepIndex+1, last.StableVersion, last.CanaryVersion, last.Weights, last.Message)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// chaosSingle is one `sluice run` process, restarted on the same ports
// and state directory (crashRig's), with wipe removing its state.
type chaosSingle struct {
	mu       sync.Mutex
	rig      *crashRig
	stateDir string
	daemons  []*daemon
	// wipeCluster deletes the state objects (the cluster store).
	wipeCluster func()
}

func startChaosSingle(t *testing.T, repo *gitRepo, wipeCluster func(), flags ...string) *chaosSingle {
	t.Helper()
	s := &chaosSingle{stateDir: t.TempDir(), wipeCluster: wipeCluster}
	// --ack-timeout: a withheld ACK must hold the step for as long as the
	// cell needs, not the default 10 s.
	s.rig = &crashRig{t: t, repo: repo, flags: append([]string{"--state-dir", s.stateDir, "--ack-timeout", "60s"}, flags...)}
	s.rig.start()
	s.daemons = append(s.daemons, s.rig.d)
	return s
}

func (s *chaosSingle) current() *daemon {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rig.d
}

func (s *chaosSingle) status(key string) (httpapi.RolloutStatus, bool) {
	d := s.current()
	select {
	case <-d.exited:
		return httpapi.RolloutStatus{}, false
	default:
	}
	return d.status(key)
}

func (s *chaosSingle) xdsAddr() string   { return s.current().xdsAddr }
func (s *chaosSingle) leaderXDS() string { return s.current().xdsAddr }
func (s *chaosSingle) cli(args ...string) {
	s.current().cli(args...)
}

func (s *chaosSingle) starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.daemons)
}

func (s *chaosSingle) logs(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, d := range s.daemons[min(n, len(s.daemons)):] {
		b.WriteString(d.log.String())
	}
	return b.String()
}

func (s *chaosSingle) inject(f chaosFault) {
	t := s.rig.t
	t.Helper()
	s.rig.kill()
	if f == faultWipe {
		if err := os.RemoveAll(s.stateDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(s.stateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if s.wipeCluster != nil {
			s.wipeCluster()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rig.start()
	s.daemons = append(s.daemons, s.rig.d)
}

// lastAnswer is when, from the fault at from, the last call answered by
// version started; "never" when none was.
func lastAnswer(calls []probe.Answer, version string, from time.Time) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if a := calls[i]; a.Err == nil && a.Version == version {
			return a.Started.Sub(from).Round(10 * time.Millisecond).String()
		}
	}
	return "never"
}

// firstFailure describes the first call that failed or found no backend.
func firstFailure(calls []probe.Answer) string {
	for _, a := range calls {
		if a.Err != nil || a.Version == "" {
			return fmt.Sprintf("%s at %s: %v", a.Class, a.Started.Format("15:04:05.000"), a.Err)
		}
	}
	return "none"
}
