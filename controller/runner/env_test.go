package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
	"github.com/sluice-dev/sluice/controller/tracing"
)

// The runner is tested against the real bbolt store and the real alert
// dispatcher delivering to a local HTTP webhook. Traffic and Analyzer are
// recording doubles at the edge: the runner is the thing under test, and
// they let a test decide when an ACK or a verdict arrives.

var errFakeNack = errors.New("fake nack")

// fakeTraffic records published traffic and answers WaitForAck as told.
type fakeTraffic struct {
	mu      sync.Mutex
	sets    []api.Traffic
	mode    string // "ack" (default), "block" (until ctx ends), "nack", "unverified", "gate" (until release), "held" (gate, ending as a HeldError)
	onSet   func(api.Traffic) error
	waiting int
	gate    chan struct{}
}

func (f *fakeTraffic) SetTraffic(t api.Traffic) (string, error) {
	f.mu.Lock()
	hook := f.onSet
	f.mu.Unlock()
	if hook != nil {
		if err := hook(t); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, t)
	return fmt.Sprint(len(f.sets)), nil
}

func (f *fakeTraffic) WaitForAck(ctx context.Context, host, version string) error {
	f.mu.Lock()
	mode, gate := f.mode, f.gate
	f.waiting++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	switch mode {
	case "block":
		<-ctx.Done()
		return fmt.Errorf("wait %s %s: %w", host, version, ctx.Err())
	case "gate", "held":
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			if mode == "held" {
				return &HeldError{Side: "canary", Err: ctx.Err()}
			}
			return fmt.Errorf("wait %s %s: %w", host, version, ctx.Err())
		}
	case "nack":
		return fmt.Errorf("client rejected %s: %w", version, errFakeNack)
	case "unverified":
		return fmt.Errorf("routers: %w", &UnverifiedError{Message: "istio: weight unverified: no status"})
	}
	return nil
}

func (f *fakeTraffic) setMode(m string) {
	f.mu.Lock()
	f.mode = m
	f.gate = make(chan struct{})
	f.mu.Unlock()
}

// release answers every WaitForAck blocked in "gate" mode with an ACK, and
// goes back to answering at once.
func (f *fakeTraffic) release() {
	f.mu.Lock()
	close(f.gate)
	f.mode = "ack"
	f.mu.Unlock()
}

// last is the most recently published traffic.
func (f *fakeTraffic) last() (api.Traffic, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sets) == 0 {
		return api.Traffic{}, 0
	}
	return f.sets[len(f.sets)-1], len(f.sets)
}

// lastFor is the most recently published traffic of one rollout.
func (f *fakeTraffic) lastFor(key api.Key) (api.Traffic, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.sets) - 1; i >= 0; i-- {
		if f.sets[i].Rollout == key {
			return f.sets[i], true
		}
	}
	return api.Traffic{}, false
}

// fakeAnalyzer records started runs; the test reports their verdicts.
type fakeAnalyzer struct {
	mu      sync.Mutex
	started []rollout.StartAnalysis
	reports map[string]func(rollout.AnalysisResult)
	stopped map[string]int
}

func newFakeAnalyzer() *fakeAnalyzer {
	return &fakeAnalyzer{reports: map[string]func(rollout.AnalysisResult){}, stopped: map[string]int{}}
}

func (f *fakeAnalyzer) Start(ctx context.Context, run rollout.StartAnalysis, report func(rollout.AnalysisResult)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, run)
	f.reports[run.Run] = report
	return func() {
		f.mu.Lock()
		f.stopped[run.Run]++
		f.mu.Unlock()
	}
}

func (f *fakeAnalyzer) report(run string, phase rollout.AnalysisPhase, msg string) bool {
	f.mu.Lock()
	rep := f.reports[run]
	f.mu.Unlock()
	if rep == nil {
		return false
	}
	rep(rollout.AnalysisResult{Run: run, Phase: phase, Message: msg})
	return true
}

func (f *fakeAnalyzer) runs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.started {
		out = append(out, s.Run)
	}
	return out
}

// webhook is a local alert sink that records what it receives.
type webhook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	alerts []alert.Alert
}

func newWebhook(t testing.TB) *webhook {
	w := &webhook{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var a alert.Alert
		if err := json.Unmarshal(b, &a); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.alerts = append(w.alerts, a)
		w.mu.Unlock()
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// ids lists the received alert ids, in order.
func (w *webhook) ids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.alerts {
		out = append(out, a.ID)
	}
	return out
}

func (w *webhook) has(id string) bool {
	for _, got := range w.ids() {
		if got == id {
			return true
		}
	}
	return false
}

// env is one runner over a state directory, with its store, dispatcher and
// doubles. Several envs may use the same directory one after the other, as
// a restarted daemon does.
type env struct {
	t        testing.TB
	store    *store.Store
	traffic  *fakeTraffic
	analyzer *fakeAnalyzer
	hook     *webhook
	runner   *Runner
	stopDisp context.CancelFunc
	dispDone chan struct{}
	closed   bool
}

type envOptions struct {
	dir        string
	hook       *webhook
	noAnalyzer bool
	ackTimeout time.Duration
	storeWrap  func(Store) Store
	now        func() time.Time
	analyzer   Analyzer // replaces the recording double
	limits     Limits
	tracing    *tracing.Provider
	workloads  Workloads
	maxWorkers int
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.hook == nil {
		o.hook = newWebhook(t)
	}
	st, err := store.Open(o.dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: o.hook.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := alert.New(alert.Options{Outbox: st, Sinks: []alert.Sink{sink}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, store: st, traffic: &fakeTraffic{}, hook: o.hook, stopDisp: cancel, dispDone: make(chan struct{})}
	go func() {
		defer close(e.dispDone)
		_ = disp.Run(ctx)
	}()
	opts := Options{Store: st, Traffic: e.traffic, Alerter: disp, AckTimeout: o.ackTimeout, Now: o.now, Limits: o.limits, Tracing: o.tracing, Workloads: o.workloads, MaxWorkers: o.maxWorkers}
	if o.storeWrap != nil {
		opts.Store = o.storeWrap(st)
	}
	switch {
	case o.analyzer != nil:
		opts.Analyzer = o.analyzer
	case !o.noAnalyzer:
		e.analyzer = newFakeAnalyzer()
		opts.Analyzer = e.analyzer
	}
	if e.runner, err = New(opts); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

// drain waits until the runner is idle and the outbox has delivered
// everything, so that closing interrupts no delivery (an interrupted one is
// legitimately sent again after the restart: delivery is at least once).
func (e *env) drain() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.runner.WaitIdle(ctx); err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, "outbox drained", func() bool {
		pending, err := e.store.PendingAlerts("webhook:" + e.hook.srv.URL)
		return err == nil && len(pending) == 0
	})
}

// close stops the runner, the dispatcher and the store, like a clean exit.
func (e *env) close() {
	if e.closed {
		return
	}
	e.closed = true
	_ = e.runner.Close()
	e.stopDisp()
	<-e.dispDone
	_ = e.store.Close()
}

// do feeds an event and waits for it.
func (e *env) do(key api.Key, ev rollout.Event) rollout.State {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.runner.Do(ctx, key, ev)
	if err != nil {
		e.t.Fatalf("%T: %v", ev, err)
	}
	return s
}

// eventually polls cond until it holds or 10s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitState polls the rollout's state until cond holds.
func (e *env) waitState(key api.Key, what string, cond func(rollout.State) bool) rollout.State {
	e.t.Helper()
	var s rollout.State
	eventually(e.t, what, func() bool {
		var ok bool
		s, ok = e.runner.State(key)
		return ok && cond(s)
	})
	return s
}

var checkout = api.Key{Namespace: "default", Name: "checkout"}

// spec builds a rollout of version v with the given steps. Its host is
// <name>.internal in the default namespace, <name>.<namespace>.internal
// elsewhere: one host has one owner, so rollouts of one name in two
// namespaces need two hosts.
func spec(key api.Key, v string, steps ...api.Step) *api.Rollout {
	host := key.Name + ".internal"
	if key.Namespace != api.DefaultNamespace {
		host = key.Name + "." + key.Namespace + ".internal"
	}
	return &api.Rollout{Key: key, Version: v, Steps: steps, XDS: &api.XDSConfig{
		Host:      host,
		Endpoints: map[string][]string{"v1": {"127.0.0.1:9001"}, "v2": {"127.0.0.1:9002"}, "v3": {"127.0.0.1:9003"}},
	}}
}

func setWeight(w int32) api.Step { return api.Step{Kind: api.StepSetWeight, Weight: w} }

func pause(d time.Duration) api.Step {
	return api.Step{Kind: api.StepPause, Pause: &api.Pause{Duration: d}}
}

func analysisStep(name string) api.Step {
	return api.Step{Kind: api.StepAnalysis, Analysis: &api.Analysis{Templates: []api.TemplateRef{{Name: name}}}}
}

// waitingCount is how many WaitForAck calls are blocked now.
func (f *fakeTraffic) waitingCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}
