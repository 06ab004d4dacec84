package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
	"github.com/sluice-dev/sluice/gateway"
)

// The crash test runs a daemon-like child process (this test binary,
// TestCrashChild) on a state directory and kills it with SIGKILL at random
// moments while a canary is in flight, then lets a last child finish it.
// Everything in the child is real: bbolt store, alert outbox delivering to
// the parent's webhook, xDS gateway, analysis engine measuring the
// parent's HTTP endpoint. The child logs every traffic the gateway
// accepted, so the parent can check what clients could have seen.

const (
	crashDirEnv  = "SLUICE_RUNNER_CRASH_DIR"
	crashHookEnv = "SLUICE_RUNNER_CRASH_HOOK"
	crashRateEnv = "SLUICE_RUNNER_CRASH_RATE"
	childReady   = "CRASH-CHILD-READY"
	childAt      = "CRASH-CHILD-AT " // + a killClass, once the stored state is there
)

// Where a kill can land, judged from the state stored when it died.
const (
	killBeforeCanary = "before the canary"
	killInFirstPause = "in the first pause"
	killInAnalysis   = "in an analysis"
	killInFinalPause = "in the final pause"
	killBetween      = "between steps"
)

// minKills is how many kills must land in each part of the canary. Until
// every part has them, the parent kills a child only when it reports being
// in a part that still lacks kills, and at once, so the kill lands there:
// every child waits nextCommitAfter in v1 before its next commit, the
// parent holds every analysis measurement until the analysis has its
// kills, and a pause lasts 3s from its start (one kill when it is
// entered). Between steps (waiting for an ACK) is too short to aim at;
// the random kills that follow land there too.
var minKills = map[string]int{killBeforeCanary: 2, killInFirstPause: 1, killInAnalysis: 3, killInFinalPause: 1}

// nextCommitAfter is how long a child with v1 stable waits before v2
// arrives, as the next commit would some time after the first.
const nextCommitAfter = time.Second

// killClass names the part of the canary a stored state is in.
func killClass(s rollout.State) string {
	st, _ := stepAt(s)
	switch {
	case s.CanaryVersion == "":
		return killBeforeCanary
	case s.Cursor == rollout.CursorRunning && st.Kind == api.StepPause && int(s.StepIndex) == len(s.Steps())-1:
		return killInFinalPause
	case s.Cursor == rollout.CursorRunning && st.Kind == api.StepPause:
		return killInFirstPause
	case s.Cursor == rollout.CursorRunning && st.Kind == api.StepAnalysis:
		return killInAnalysis
	default:
		return killBetween
	}
}

// crashSteps: a pause and an analysis step long enough for kills to land
// in both.
func crashSteps() []api.Step {
	return []api.Step{setWeight(20), pause(3 * time.Second), analysisStep("success-rate"), setWeight(50), pause(3 * time.Second)}
}

// trafficLine is one traffic the gateway accepted, as the child logs it.
type trafficLine struct {
	PID    int    `json:"pid"`
	Gen    uint64 `json:"gen"`
	Stable string `json:"stable"`
	Canary string `json:"canary"`
	Weight int32  `json:"weight"`
}

// loggingTraffic publishes through the real gateway and logs what it
// accepted, synced, before answering.
type loggingTraffic struct {
	*gateway.Server
	mu  sync.Mutex
	log *os.File
}

func (l *loggingTraffic) SetTraffic(t api.Traffic) (string, error) {
	v, err := l.Server.SetTraffic(t)
	if err != nil {
		return v, err
	}
	b, _ := json.Marshal(trafficLine{PID: os.Getpid(), Stable: t.StableVersion, Canary: t.CanaryVersion, Weight: t.Weights.Canary})
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.log.Write(append(b, '\n')); err != nil {
		return "", err
	}
	return v, l.log.Sync()
}

// TestCrashChild is the child process of TestCrashRestart; it does nothing
// in a normal test run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process of TestCrashRestart")
	}
	st, err := store.Open(dir, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: os.Getenv(crashHookEnv)})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := alert.New(alert.Options{Outbox: st, Sinks: []alert.Sink{sink}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = disp.Run(ctx) }()
	gw, err := gateway.New(gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "traffic.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := analysis.New(analysis.Options{WebAllowHosts: []string{"127.0.0.1"}}) // the stats server is on loopback
	if err != nil {
		t.Fatal(err)
	}
	an := engineAnalyzer{engine: engine, templates: map[string]*api.AnalysisTemplate{"success-rate": {
		Key: api.Key{Namespace: "default", Name: "success-rate"},
		Metrics: []api.Metric{{
			Name: "success-rate", Interval: 60 * time.Millisecond, Count: api.IntOrArg{Value: 8},
			SuccessCondition: "result >= 0.95", ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
			Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: os.Getenv(crashRateEnv), JSONPath: "{$.rate}"}},
		}},
	}}}
	r, err := New(Options{Store: st, Traffic: &loggingTraffic{Server: gw, log: logf}, Analyzer: an, Alerter: disp})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println(childReady) // the parent's kill timer starts now
	// What gitwatch and the daemon would do: v1 is the first commit, v2 the
	// next; a commit is not applied again once the state has moved past it.
	// Each change of where the state stands is reported to the parent.
	reported := ""
	var v1Since time.Time
	for {
		s, ok := r.State(checkout)
		if ok && !(s.StableVersion == "v2" && s.CanaryVersion == "") {
			if where := killClass(s); where != reported {
				fmt.Println(childAt + where)
				reported = where
			}
		}
		switch {
		case !ok:
			r.Submit(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", crashSteps()...)})
		case s.StableVersion == "v1" && s.CanaryVersion == "":
			if v1Since.IsZero() {
				v1Since = time.Now()
			}
			if time.Since(v1Since) >= nextCommitAfter {
				r.Submit(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", crashSteps()...)})
			}
		case s.StableVersion == "v2" && s.CanaryVersion == "" && s.Settle == nil:
			// Promoted and ACKed (rollout-completed is sent on the ACK,
			// which arrives from a goroutine WaitIdle does not wait for).
			// The state is published before its actions run: wait for the
			// worker to enqueue the last alerts, then for their delivery.
			if err := r.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, "outbox drained", func() bool {
				p, err := st.PendingAlerts(sink.Name())
				return err == nil && len(p) == 0
			})
			_ = r.Close()
			return
		}
		if err := r.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCrashRestart kills the child in every part of a canary (at least
// minKills in each, then at random moments) and checks after every kill that the restarted child continues at the step
// and weights that were stored, that weights never move backwards or jump
// past a step, and at the end that every alert arrived under exactly the
// ids a crash-free run sends.
func TestCrashRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	dir := t.TempDir()
	hook := newWebhook(t)
	// While hold is set, a measurement is not answered until the child
	// dies: the analysis lasts until the parent kills it.
	var hold atomic.Bool
	rate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, `{"rate": 0.99}`)
	}))
	t.Cleanup(rate.Close)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_CRASH_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed) // replay a failed run's kill moments
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)

	// child starts a child; ready is closed once its runner has started,
	// and at receives where its stored state stands, on every change.
	child := func() (cmd *exec.Cmd, ready chan struct{}, at chan string) {
		cmd = exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashHookEnv+"="+hook.srv.URL, crashRateEnv+"="+rate.URL)
		ready, at = make(chan struct{}), make(chan string, 64)
		cmd.Stderr = os.Stderr
		cmd.Stdout = &childOutput{ready: ready, at: at}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, ready, at
	}
	// where counts the kills by the part of the canary they landed in;
	// lacking says whether a part still needs kills.
	where := map[string]int{}
	lacking := func(w string) bool { return where[w] < minKills[w] }
	type kill struct {
		pid   int
		state rollout.State // stored when the child died
	}
	var killed []kill
	aimedKills := 0
	allPlaced := func() bool {
		for w := range minKills {
			if lacking(w) {
				return false
			}
		}
		return true
	}
	// pidAfterLast is the child started after the last kill: the final one,
	// or one that finished the canary before it could be killed.
	pidAfterLast := 0
	for attempt := 0; len(killed) < 20; attempt++ {
		if attempt == 100 {
			t.Fatalf("seed %d: only %d of 100 children were killed with a stored state", seed, len(killed))
		}
		hold.Store(lacking(killInAnalysis))
		cmd, ready, at := child()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-ready:
		case err := <-exited:
			t.Fatalf("child exited before its runner started: %v", err)
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("child did not start its runner within 60s")
		}
		// Until every part has its kills, a child dies as soon as it
		// reports a part that lacks them; then at a random moment.
		var random <-chan time.Time
		if allPlaced() {
			random = time.After(time.Duration(rng.IntN(500)) * time.Millisecond)
		}
		aimed := false
	wait:
		for {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("child failed: %v", err)
				}
				break wait
			case w := <-at:
				if !lacking(w) {
					continue
				}
				aimed = true
			case <-random:
			}
			_ = cmd.Process.Kill() // SIGKILL: no cleanup of any kind
			<-exited
			break wait
		}
		s, ok := storedState(t, dir)
		if !ok {
			continue // killed before the first commit was stored
		}
		if s.StableVersion == "v2" && s.CanaryVersion == "" {
			pidAfterLast = cmd.Process.Pid
			break // finished before it could be killed
		}
		killed = append(killed, kill{pid: cmd.Process.Pid, state: s})
		where[killClass(s)]++
		if aimed {
			aimedKills++
		}
	}
	t.Logf("seed %d: %d kills (%d aimed): %v", seed, len(killed), aimedKills, where)
	for w, n := range minKills {
		if where[w] < n {
			t.Errorf("seed %d: %d kills landed %s, want at least %d (all: %v)", seed, where[w], w, n, where)
		}
	}
	hold.Store(false)

	// The last child finishes the canary.
	final, _, _ := child()
	done := make(chan error, 1)
	go func() { done <- final.Wait() }()
	if pidAfterLast == 0 {
		pidAfterLast = final.Process.Pid
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("final child: %v", err)
		}
	case <-time.After(90 * time.Second):
		_ = final.Process.Kill()
		t.Fatal("final child did not finish the canary")
	}

	lines := readTrafficLog(t, filepath.Join(dir, "traffic.log"))
	// After every kill the restarted child first pushes exactly the stored
	// traffic: same step, same weights.
	for i, k := range killed {
		next := pidAfterLast
		if i+1 < len(killed) {
			next = killed[i+1].pid
		}
		first, ok := firstOf(lines, next)
		if !ok {
			continue // the next child was killed before it pushed anything
		}
		want := k.state.Traffic()
		if first.Weight != want.Weights.Canary || first.Canary != want.CanaryVersion || first.Stable != want.StableVersion {
			t.Errorf("kill %d at step %d (%d%% %s): restart pushed %+v", i, k.state.StepIndex, want.Weights.Canary, want.CanaryVersion, first)
		}
	}
	// What clients could see of v2 only ever grew through the steps: 0, 20,
	// 50, then all of it as stable.
	allowed := []int32{0, 20, 50}
	last := int32(0)
	for _, l := range lines {
		if l.Stable == "v2" {
			last = 100
			continue
		}
		if l.Canary != "v2" {
			continue
		}
		if !slices.Contains(allowed, l.Weight) || l.Weight < last {
			t.Fatalf("v2 weight %d after %d (pid %d)", l.Weight, last, l.PID)
		}
		last = l.Weight
	}
	if last != 100 {
		t.Fatalf("v2 never became stable; last weight %d", last)
	}

	// Alerts: every id a crash-free run sends, and no other.
	want := []string{"started", "step-completed/0", "step-completed/1", "step-completed/2", "step-completed/3", "step-completed/4", "completed"}
	for i := range want {
		want[i] = "default/checkout/2222222/" + want[i]
	}
	missing := func() (out []string) {
		for _, id := range want {
			if !hook.has(id) {
				out = append(out, id)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Errorf("alerts never delivered: %v (got %v)", m, hook.ids())
	}
	for _, id := range hook.ids() {
		if !slices.Contains(want, id) {
			t.Errorf("unexpected alert id %s", id)
		}
	}
}

// childOutput reads a child's stdout line by line: it closes ready at
// the ready marker and sends where the child reports its state.
type childOutput struct {
	ready   chan struct{}
	at      chan string
	partial []byte
	isReady bool
}

func (w *childOutput) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		line, rest, ok := bytes.Cut(w.partial, []byte("\n"))
		if !ok {
			return len(p), nil
		}
		w.partial = rest
		switch {
		case !w.isReady && bytes.Contains(line, []byte(childReady)):
			w.isReady = true
			close(w.ready)
		case bytes.HasPrefix(line, []byte(childAt)):
			select {
			case w.at <- string(line[len(childAt):]):
			default: // the parent stopped listening: the child is dead
			}
		}
	}
}

func storedState(t *testing.T, dir string) (rollout.State, bool) {
	t.Helper()
	st, err := store.Open(dir, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	b, ok := all[checkout]
	if !ok {
		return rollout.State{}, false
	}
	rec, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return rec.State, true
}

func stepAt(s rollout.State) (api.Step, bool) {
	steps := s.Steps()
	if int(s.StepIndex) >= len(steps) {
		return api.Step{}, false
	}
	return steps[s.StepIndex], true
}

func readTrafficLog(t *testing.T, path string) []trafficLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []trafficLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l trafficLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line torn by SIGKILL
		}
		out = append(out, l)
	}
	return out
}

func firstOf(lines []trafficLine, pid int) (trafficLine, bool) {
	for _, l := range lines {
		if l.PID == pid {
			return l, true
		}
	}
	return trafficLine{}, false
}
