package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// The crashed rollout: a timed pause, an analysis step and a final pause,
// so that kills land while a timer runs, while a run measures and while
// the canary waits for `sluice promote`.
const (
	crashName      = "crash"
	crashPause     = 3 * time.Second
	crashKills     = 20
	crashClients   = 3 // two for the counts, one watching the whole test
	crashFinalStep = 4
	crashSteps     = `- setWeight: 20
- pause: {duration: 3s}
- analysis:
    templates: [{templateName: crash-success}]
- setWeight: 60
- pause: {}
`
)

// crashPlan places the first kills: each waits until the status shows that
// part of the rollout and kills right after that read, so every part is
// hit at least twice whatever the seed (the story moves through them in
// this order: a canary, its promotion, the next push). The kills after
// these land at random moments.
var crashPlan = []string{
	"pause 3s", "analysis", "pause {}", "healthy",
	"pause 3s", "analysis", "pause {}", "healthy",
}

// crashWeights is the split each step of crashSteps stands for once
// reached: 20 % up to the analysis, 60 % after it, 0 % once promoted.
func crashWeights(st httpapi.RolloutStatus) api.Weights {
	switch {
	case st.CanaryVersion == "":
		return api.CanaryWeights(0)
	case st.StepIndex < 3:
		return api.CanaryWeights(20)
	default:
		return api.CanaryWeights(60)
	}
}

// crashWhere names the part of the rollout a status is in.
func crashWhere(st httpapi.RolloutStatus) string {
	if st.CanaryVersion == "" {
		return "healthy"
	}
	return [...]string{"setWeight 20", "pause 3s", "analysis", "setWeight 60", "pause {}", "promoting"}[min(st.StepIndex, 5)]
}

// crashRig restarts one daemon on the same state directory and ports and
// remembers what the test saw of the rollout, to judge each restart
// against the last status read before the kill.
type crashRig struct {
	t     *testing.T
	repo  *gitRepo
	hook  *sink
	gate  *alertGate
	flags []string
	d     *daemon

	versions []string
	backends []*backend
	spec     rolloutSpec
	commits  []string // canary commits, in push order
	promoted map[string]bool
	reached  map[string]int32 // highest step index seen per commit
	pausedAt map[string]bool  // commit seen in its final pause
	runs     map[string]rollout.AnalysisPhase
	runsOf   map[string]map[string]bool // commit → analysis run names
	landed   map[string]int             // where kills landed
	landedAt map[string]int             // commit + where → kills
}

// TestCrashSafety kills `sluice run` with SIGKILL at random moments of
// three canaries (in timed pauses, in analysis, in the final pause and
// while healthy), restarts it on the same state directory and ports, and
// checks DESIGN §10: the rollout continues where it was, weights never
// move without a completed step, a finished analysis stays finished and a
// step's analysis is never skipped, the clients keep their routes while
// sluice is down and see the same split after they reconnect, and every
// alert arrives, under one id per logical event.
//
// The moments come from a seeded generator: the seed is logged, and
// SLUICE_CRASH_SEED=<seed> replays the same delays.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	began := time.Now()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_CRASH_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with SLUICE_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	c := &crashRig{t: t, repo: newGitRepo(t), hook: startSink(t),
		versions: []string{v1, v2, "e2e/app:v3"},
		promoted: map[string]bool{}, reached: map[string]int32{}, pausedAt: map[string]bool{},
		runs: map[string]rollout.AnalysisPhase{}, runsOf: map[string]map[string]bool{},
		landed: map[string]int{}, landedAt: map[string]int{}}
	c.spec = rolloutSpec{Name: crashName, Host: "crash.e2e", Endpoints: map[string]string{}, Steps: crashSteps}
	for _, v := range c.versions {
		b := startBackend(t, v, 0)
		c.backends = append(c.backends, b)
		c.spec.Endpoints[v] = b.grpc
	}
	c.gate = startGate(t, c.hook)
	c.flags = []string{"--state-dir", t.TempDir(), "--alert-webhook", c.gate.srv.URL}

	c.push(0)
	c.start()
	c.d.waitStatus(crashName, 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	lg := startLoad(t, probe.LoadOptions{XDSServer: c.d.xdsAddr, Host: c.spec.Host, Clients: crashClients - 1, Rate: 250})
	// The watcher's window spans the whole test: no call of it may fail,
	// whatever moment a kill or a restart hits.
	watch := startLoad(t, probe.LoadOptions{XDSServer: c.d.xdsAddr, Host: c.spec.Host, Clients: 1, Rate: 40, NodePrefix: "watch", Window: time.Hour})
	for _, l := range []*probe.LoadGen{lg, watch} {
		if _, err := l.WaitFirst(ctxFor(t, 30*time.Second), v1); err != nil {
			t.Fatal(err)
		}
	}
	c.commits = append(c.commits, c.push(1))

	prev := ""
	for kill := 1; kill <= crashKills; kill++ {
		c.drive(prev)
		wait := time.Duration(20+rng.IntN(2980)) * time.Millisecond
		// Half the restarts are checked from the clients' side; the others
		// are killed again sooner, some before the clients are back.
		judge := kill == crashKills || rng.IntN(2) == 0
		// A third of the time the sink is down from before the moment
		// until after the restart: the alerts of that time must wait in
		// the outbox through the kill.
		sinkDown := rng.IntN(3) == 0
		c.gate.shut.Store(sinkDown)
		edgeDraw := rng.IntN(3) == 0
		var before httpapi.RolloutStatus
		var edge bool
		if kill <= len(crashPlan) {
			before = c.reach(crashPlan[kill-1], seed)
		} else {
			before, edge = c.moment(wait, edgeDraw)
		}
		where := crashWhere(before)
		if edge {
			c.landed["just after a transition"]++
		}
		c.landed[where]++
		c.landedAt[before.Commit+"/"+where]++
		prev = before.Commit + "/" + where

		c.kill()
		// While sluice is down the clients route with what they have.
		lg.ResetWindow()
		time.Sleep(time.Duration(300+rng.IntN(400)) * time.Millisecond)
		down := lg.Observe().Class[probe.DefaultClass]
		if down.Answered() == 0 || down[""].Total() > 0 {
			t.Errorf("kill %d: while sluice was down the clients got %v", kill, down)
		}

		c.start()
		after := c.status()
		c.gate.shut.Store(false)
		c.compare(kill, before, after)
		split := "not counted"
		if judge {
			split = c.resync(lg)
		}
		moment := wait.String()
		switch {
		case kill <= len(crashPlan):
			moment = "planned"
		case edge:
			moment = "transition"
		}
		t.Logf("kill %2d after %-10s at %-12s (sink down %-5v) commit %.7s step %d %d/%d -> restarted at step %d %d/%d, phase %s; down: %d answered; after reconnect: %s",
			kill, moment, where, sinkDown, before.Commit, before.StepIndex, before.Weights.Stable, before.Weights.Canary,
			after.StepIndex, after.Weights.Stable, after.Weights.Canary, after.Phase, down.Answered(), split)
	}
	c.see(c.status())
	whole := watch.Observe().Class[probe.DefaultClass]
	for v, n := range whole {
		if v == "" || n.Failed > 0 {
			t.Errorf("over the whole test a client had %d calls fail on %q: %v", n.Total(), v, whole)
		}
	}
	t.Logf("watching client over the whole test: %v", whole)
	c.checkAlerts()
	c.checkPauses()
	t.Logf("seed %d: %d kills landed %v over %d canaries (%d promoted) in %v",
		seed, crashKills, c.landed, len(c.commits), len(c.promoted), time.Since(began).Round(time.Second))
	for _, where := range slices.Compact(slices.Sorted(slices.Values(crashPlan))) {
		planned := 0
		for _, w := range crashPlan {
			if w == where {
				planned++
			}
		}
		if c.landed[where] < planned {
			t.Errorf("seed %d: %d kills landed at %s, want at least %d (all: %v)", seed, c.landed[where], where, planned, c.landed)
		}
	}
}

// alertGate stands in front of the alert sink: shut, it answers 503 and
// the daemon keeps the alert in its outbox; open, it answers after a
// moment, so that some kills land while a delivery is in flight.
type alertGate struct {
	srv  *httptest.Server
	shut atomic.Bool
}

func startGate(t *testing.T, s *sink) *alertGate {
	g := &alertGate{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.shut.Load() {
			http.Error(w, "sink down", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(100 * time.Millisecond)
		s.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// push commits version i (mod the versions) with the analysis reading the
// canary backend's own counters, and returns the commit.
func (c *crashRig) push(i int) string {
	v := i % len(c.versions)
	c.spec.Version = c.versions[v]
	return c.repo.push(c.spec.Version, map[string]string{
		"rollouts/crash.yaml": c.spec.yaml(),
		"analysis/web.yaml":   webTemplate("crash-success", "http://"+c.backends[v].http+"/stats"),
	})
}

// start runs the daemon; the first start picks the ports, which every
// restart then binds again so the clients find it where it was.
func (c *crashRig) start() {
	c.t.Helper()
	c.d = startDaemon(c.t, c.repo, c.flags...)
	if !slices.Contains(c.flags, "--xds-addr") {
		c.flags = append(c.flags, "--xds-addr", c.d.xdsAddr, "--http-addr", c.d.httpAddr)
	}
}

// kill sends SIGKILL: no shutdown code runs.
func (c *crashRig) kill() {
	c.t.Helper()
	if err := c.d.cmd.Process.Kill(); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-c.d.exited:
	case <-time.After(10 * time.Second):
		c.t.Fatal("sluice run still alive 10s after SIGKILL")
	}
}

// status reads the rollout (polling while a restarted daemon warms up)
// and checks it.
func (c *crashRig) status() httpapi.RolloutStatus {
	c.t.Helper()
	st := c.d.waitStatus(crashName, 15*time.Second, "status", func(httpapi.RolloutStatus) bool { return true })
	c.see(st)
	return st
}

// drive moves the story on between kills: once a kill has landed in the
// final pause it promotes, once one has landed while healthy it pushes the
// next version, and it waits for progress when two kills in a row hit the
// same waiting step (a restart starts an analysis afresh).
func (c *crashRig) drive(prev string) {
	c.t.Helper()
	st := c.status()
	cur := c.commits[len(c.commits)-1]
	switch {
	case st.Commit == cur && st.CanaryVersion != "" && st.StepIndex == crashFinalStep && c.landedAt[cur+"/pause {}"] > 0:
		c.d.cli("promote", crashName)
		c.promoted[cur] = true
		c.see(c.d.waitStatus(crashName, 30*time.Second, "promotion", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy
		}))
	case st.Commit == cur && st.CanaryVersion == "" && c.landedAt[cur+"/healthy"] > 0:
		// A step waits for the ACK of the clients that are connected; one
		// pushed while all of them are still in reconnect back-off after
		// the last kill goes on at once, they keep routing to the old
		// version, and the analysis measures a canary without traffic
		// ("no data"). Push once they are back, so that the analysis step
		// has something to measure.
		c.waitClients()
		c.commits = append(c.commits, c.push(len(c.commits)+1))
	case prev == st.Commit+"/"+crashWhere(st) && st.CanaryVersion != "" && st.StepIndex != crashFinalStep && c.landedAt[prev] >= 2:
		c.see(c.d.waitStatus(crashName, 60*time.Second, "progress after two kills in one step", func(s httpapi.RolloutStatus) bool {
			return s.Commit != st.Commit || s.StepIndex != st.StepIndex
		}))
	}
}

// moment waits for the kill and returns the last status read before it.
// Most moments are a random wait; an edge moment, where the rollout moves
// by itself, is the instant its position changes (a step just entered: its
// traffic may still await the ACK, its alerts may not have left the
// outbox).
func (c *crashRig) moment(wait time.Duration, edge bool) (httpapi.RolloutStatus, bool) {
	c.t.Helper()
	st0 := c.status()
	still := st0.Commit == c.commits[len(c.commits)-1] && (st0.CanaryVersion == "" || st0.StepIndex == crashFinalStep)
	if !edge || still {
		time.Sleep(wait)
		return c.status(), false
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := c.d.status(crashName); ok && (st.Commit != st0.Commit || st.StepIndex != st0.StepIndex || st.Phase != st0.Phase) {
			c.see(st)
			return st, true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.status(), false
}

// reach polls the status until it shows the rollout at where and returns
// that read: the kill that follows at once is counted there.
func (c *crashRig) reach(where string, seed uint64) httpapi.RolloutStatus {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := c.status()
		if crashWhere(st) == where {
			return st
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("seed %d: the rollout did not reach %s within 60s for a planned kill; last at %s (commit %.7s step %d)", seed, where, crashWhere(st), st.Commit, st.StepIndex)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// see checks one status on its own and records what it shows.
func (c *crashRig) see(st httpapi.RolloutStatus) {
	c.t.Helper()
	if st.Aborted || st.Phase == rollout.PhaseDegraded || len(st.Errors) > 0 {
		c.t.Fatalf("rollout degraded: %+v", st)
	}
	if want := crashWeights(st); st.Weights != want {
		c.t.Errorf("commit %.7s %s at step %d: weights %+v, want %+v", st.Commit, st.Phase, st.StepIndex, st.Weights, want)
	}
	if st.Commit == "" || !slices.Contains(c.commits, st.Commit) {
		return // the first version: no canary
	}
	if r, ok := c.reached[st.Commit]; !ok || st.StepIndex > r {
		c.reached[st.Commit] = st.StepIndex
	}
	if st.CanaryVersion != "" && st.StepIndex == crashFinalStep && st.Phase == rollout.PhasePaused {
		c.pausedAt[st.Commit] = true
	}
	if st.CanaryVersion == "" && !c.promoted[st.Commit] {
		c.t.Errorf("commit %.7s completed without `sluice promote`: the final pause was skipped", st.Commit)
	}
	names := c.runsOf[st.Commit]
	if names == nil {
		names = map[string]bool{}
		c.runsOf[st.Commit] = names
	}
	succeeded := false
	for _, r := range st.AnalysisRuns {
		names[r.Name] = true
		if was, ok := c.runs[r.Name]; ok && was.Terminal() && r.Phase != was {
			c.t.Errorf("analysis run %s was %s and is now %s", r.Name, was, r.Phase)
		}
		if r.Phase.Terminal() {
			c.runs[r.Name] = r.Phase
		}
		succeeded = succeeded || r.Phase == rollout.AnalysisSuccessful && len(r.Metrics) > 0 && r.Metrics[0].Value != ""
	}
	for name := range names {
		if c.runs[name].Terminal() && !slices.ContainsFunc(st.AnalysisRuns, func(r rollout.RunStatus) bool { return r.Name == name }) {
			c.t.Errorf("finished analysis run %s of commit %.7s is gone from the status", name, st.Commit)
		}
	}
	if len(names) > 1 {
		c.t.Errorf("commit %.7s ran its analysis step more than once: runs %v", st.Commit, slices.Sorted(maps.Keys(names)))
	}
	if st.StepIndex > 2 && !succeeded {
		c.t.Errorf("commit %.7s is past its analysis step (step %d) without a successful measured run: %+v", st.Commit, st.StepIndex, st.AnalysisRuns)
	}
}

// compare judges the status after a restart against the last one read
// before the kill.
func (c *crashRig) compare(kill int, before, after httpapi.RolloutStatus) {
	c.t.Helper()
	if after.Commit != before.Commit {
		// A push the killed daemon had not fetched yet is picked up now.
		if cur := c.commits[len(c.commits)-1]; after.Commit != cur || before.CanaryVersion != "" {
			c.t.Errorf("kill %d: commit %.7s before, %.7s after the restart", kill, before.Commit, after.Commit)
		}
		return
	}
	if after.CanaryVersion != before.CanaryVersion && !(after.CanaryVersion == "" && c.promoted[after.Commit]) {
		c.t.Errorf("kill %d: canary %q before, %q after the restart", kill, before.CanaryVersion, after.CanaryVersion)
	}
	if after.StableVersion != before.StableVersion && before.CanaryVersion == "" {
		c.t.Errorf("kill %d: stable %q before, %q after the restart", kill, before.StableVersion, after.StableVersion)
	}
	if after.StepIndex < before.StepIndex {
		c.t.Errorf("kill %d: step %d before, %d after the restart: went back", kill, before.StepIndex, after.StepIndex)
	}
	if before.StepIndex == crashFinalStep && before.CanaryVersion != "" && after.StepIndex != crashFinalStep {
		c.t.Errorf("kill %d: left the final pause on a restart (step %d)", kill, after.StepIndex)
	}
}

// waitClients waits until every client is connected to the daemon again.
func (c *crashRig) waitClients() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.d.metric("sluice_xds_clients") < crashClients {
		if time.Now().After(deadline) {
			c.t.Fatalf("clients did not reconnect within 30s (sluice_xds_clients %v)", c.d.metric("sluice_xds_clients"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resync waits until every client is connected to the restarted daemon
// and then until they route as its status says: a client that reconnects
// applies the routes it is sent a moment later, so a count is taken again
// (up to 15s) while it disagrees or the weights move during it.
func (c *crashRig) resync(lg *probe.LoadGen) string {
	c.t.Helper()
	c.waitClients()
	deadline := time.Now().Add(15 * time.Second)
	for count := 1; ; count++ {
		first := c.status()
		o := observe(c.t, lg, 25).Class[probe.DefaultClass]
		last := c.status()
		verdict, ok := judgeSplit(first, last, o)
		if ok {
			return fmt.Sprintf("%s (count %d)", verdict, count)
		}
		if time.Now().After(deadline) {
			c.t.Errorf("clients do not route as the restarted daemon says: %s", verdict)
			return verdict
		}
	}
}

// judgeSplit says whether what the clients saw (o) is the split of the
// status, unchanged from first to last.
func judgeSplit(first, last httpapi.RolloutStatus, o probe.Split) (string, bool) {
	if first.Weights != last.Weights || first.Commit != last.Commit || first.CanaryVersion != last.CanaryVersion {
		return fmt.Sprintf("weights moved during the count (%+v -> %+v)", first.Weights, last.Weights), false
	}
	if o[""].Total() > 0 {
		return fmt.Sprintf("%d calls found no backend: %v", o[""].Total(), o), false
	}
	if first.CanaryVersion == "" {
		return fmt.Sprintf("all %d on %s", o.Answered(), first.StableVersion), o.Share(first.StableVersion) == 1
	}
	want := float64(first.Weights.Canary) / 100
	got := o.Share(first.CanaryVersion)
	verdict := fmt.Sprintf("%.2f on the canary of %d, want %.2f", got, o.Answered(), want)
	return verdict, math.Abs(got-want) <= 0.12 && o.Share(first.StableVersion)+got == 1
}

// crashAlertID is the id DESIGN §7 and the state machine give an alert of
// the crashed rollout.
func crashAlertID(commit, suffix string) string {
	return alert.ID("default/"+crashName, commit, suffix)
}

// logicalEvent names what an alert is about from its content alone
// (event, rollout, commit and the step its reason names), so that one
// event sent under two ids shows up as two ids for one name.
func logicalEvent(a alert.Alert) string {
	key := strings.Join([]string{string(a.Event), a.Rollout, a.Commit}, " ")
	if rest, ok := strings.CutPrefix(a.Reason, "step "); ok {
		if n, _, ok := strings.Cut(rest, ":"); ok {
			key += " step " + n
		}
	}
	return key
}

// checkAlerts waits until every alert the seen progress implies has
// reached the sink (the outbox survives SIGKILL), then checks that no
// logical event came under two ids, that repeated deliveries of an id
// carry the same alert, and that nothing went wrong.
func (c *crashRig) checkAlerts() {
	c.t.Helper()
	want := map[string]bool{}
	for _, commit := range c.commits {
		reached, seen := c.reached[commit]
		if !seen {
			continue
		}
		want[crashAlertID(commit, "started")] = true
		for i := range reached {
			want[crashAlertID(commit, fmt.Sprintf("step-completed/%d", i))] = true
		}
		if c.pausedAt[commit] {
			want[crashAlertID(commit, fmt.Sprintf("paused/%d", crashFinalStep))] = true
		}
		if c.promoted[commit] && reached > crashFinalStep {
			want[crashAlertID(commit, "completed")] = true
		}
	}
	var got []received
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.hook.mu.Lock()
		got = slices.Clone(c.hook.got)
		c.hook.mu.Unlock()
		missing := maps.Clone(want)
		for _, a := range got {
			delete(missing, a.ID)
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.t.Errorf("alerts lost: %v never reached the sink (%d alerts received)", slices.Sorted(maps.Keys(missing)), len(got))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	byID := map[string]alert.Alert{}
	idsOf := map[string]map[string]bool{}
	redelivered := 0
	for _, r := range got {
		a := r.Alert
		if a.Severity == alert.SeverityError || !slices.Contains([]alert.Event{
			alert.EventRolloutStarted, alert.EventStepCompleted, alert.EventRolloutPaused, alert.EventRolloutCompleted}, a.Event) {
			c.t.Errorf("unexpected alert: %+v", a)
		}
		if first, ok := byID[a.ID]; ok {
			redelivered++
			if !sameAlert(first, a) {
				c.t.Errorf("id %s delivered twice with different content:\n%+v\n%+v", a.ID, first, a)
			}
			continue
		}
		byID[a.ID] = a
		key := logicalEvent(a)
		if idsOf[key] == nil {
			idsOf[key] = map[string]bool{}
		}
		idsOf[key][a.ID] = true
	}
	for key, ids := range idsOf {
		if len(ids) > 1 {
			c.t.Errorf("one event under %d ids: %s: %v", len(ids), key, slices.Sorted(maps.Keys(ids)))
		}
	}
	c.t.Logf("alerts: %d expected from the progress seen, %d distinct ids received, %d repeated deliveries of an id", len(want), len(byID), redelivered)
}

func sameAlert(a, b alert.Alert) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// checkPauses checks from the alerts' times that no timed pause was cut
// short by a restart: the pause starts when step 0 completes (same
// transition) and ends when step 1 completes.
func (c *crashRig) checkPauses() {
	c.t.Helper()
	at := map[string]time.Time{}
	c.hook.mu.Lock()
	for _, r := range c.hook.got {
		at[r.ID] = r.Time
	}
	c.hook.mu.Unlock()
	for _, commit := range c.commits {
		start, ok0 := at[crashAlertID(commit, "step-completed/0")]
		end, ok1 := at[crashAlertID(commit, "step-completed/1")]
		if !ok0 || !ok1 {
			continue
		}
		if took := end.Sub(start); took < crashPause-100*time.Millisecond {
			c.t.Errorf("commit %.7s: the %v pause lasted %v", commit, crashPause, took)
		} else {
			c.t.Logf("commit %.7s: the %v pause lasted %v", commit, crashPause, took.Round(time.Millisecond))
		}
	}
}

// TestCrashRestartAnswersWithRestoredRoutes: a client that reconnects the
// moment a killed sluice is back must be sent the routes in force. A gRPC
// client drops a cached Listener that a state-of-the-world LDS response
// leaves out ("resource removed") and fails its calls until it comes back,
// so an early answer from a gateway that has not yet republished the
// restored traffic cuts the clients that sluice is meant to leave alone.
func TestCrashRestartAnswersWithRestoredRoutes(t *testing.T) {
	t.Parallel()
	c := &crashRig{t: t, repo: newGitRepo(t), flags: []string{"--state-dir", t.TempDir()}}
	spec := rolloutSpec{Name: "early", Host: "early.e2e", Version: v1,
		Endpoints: map[string]string{v1: "127.0.0.1:1", v2: "127.0.0.1:2"}, Steps: "- setWeight: 30\n- pause: {}\n"}
	c.repo.push("v1", map[string]string{"early.yaml": spec.yaml()})
	c.start()
	c.d.waitStatus("early", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	spec.Version = v2
	c.repo.push("v2", map[string]string{"early.yaml": spec.yaml()})
	c.d.waitStatus("early", 30*time.Second, "pause at 30%", func(s httpapi.RolloutStatus) bool { return s.Weights.Canary == 30 })
	for i := range 3 {
		c.kill()
		first := make(chan int, 1)
		go func() { first <- firstListenerCount(c.d.xdsAddr, spec.Host, 30*time.Second) }()
		c.start()
		if n := <-first; n != 1 {
			t.Errorf("restart %d: the first LDS answer to a client reconnecting at once held %d listeners for %s, want 1", i+1, n, spec.Host)
		}
	}
}

// firstListenerCount dials addr until an ADS stream answers a request for
// the Listener name, and returns how many resources that first answer
// holds (-1 when none came before the timeout).
func firstListenerCount(addr, name string, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n, err := askListener(addr, name); err == nil {
			return n
		}
		time.Sleep(time.Millisecond)
	}
	return -1
}

func askListener(addr, name string) (int, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return 0, err
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "early"}, TypeUrl: resourcev3.ListenerType, ResourceNames: []string{name}}); err != nil {
		return 0, err
	}
	resp, err := st.Recv()
	if err != nil {
		return 0, err
	}
	return len(resp.GetResources()), nil
}
