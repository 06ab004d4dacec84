package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/tracing"
)

// Store persists rollout states; controller/store's *Store implements it.
// The bytes are the runner's own versioned record. SaveRollout must not
// keep them once it returned: the runner reuses the buffer (a store that
// holds records copies them).
type Store interface {
	SaveRollout(key api.Key, state []byte) error
	LoadRollouts() (map[api.Key][]byte, error)
}

// Traffic publishes traffic and reports its ACKs; gateway's *Server
// implements it.
type Traffic interface {
	// SetTraffic publishes t and returns the version WaitForAck takes.
	SetTraffic(t api.Traffic) (version string, err error)
	// WaitForAck returns nil once the clients for host ACKed version (or a
	// later one), an error wrapping gateway.ErrNack on a NACK, an
	// *UnverifiedError when the traffic was taken but a router cannot
	// verify it, or an error wrapping ctx.Err() when ctx ends first.
	WaitForAck(ctx context.Context, host, version string) error
}

// Analyzer runs analysis runs. Start begins run and returns at once;
// report is called with progress and, last, the terminal verdict; stop
// ends the run early. Reports after stop are ignored.
type Analyzer interface {
	Start(ctx context.Context, run rollout.StartAnalysis, report func(rollout.AnalysisResult)) (stop func())
}

// Alerter queues an alert durably (the outbox); controller/alert's
// *Dispatcher implements it. Enqueueing an id again is a no-op.
type Alerter interface {
	Enqueue(a alert.Alert) error
}

// Workloads runs each version's pods (Kubernetes mode);
// controller/workload implements it. Readiness comes back through Submit
// as rollout.PodsReady events, fed by whoever watches the cluster.
type Workloads interface {
	// Scale makes the rollout's ReplicaSets match a. It is idempotent.
	Scale(ctx context.Context, a rollout.ScaleWorkloads) error
	// Resend reports (as PodsReady) every version of the rollout again,
	// after the reports already queued: the machine expects a report of
	// every set once a ScaleWorkloads is applied.
	Resend(key api.Key)
}

// UnverifiedError is what Traffic.WaitForAck returns when the traffic was
// taken but a router cannot verify that its proxies use it (Istio without
// istiod's status reporting): the step goes on, and its status says why.
type UnverifiedError struct{ Message string }

func (e *UnverifiedError) Error() string { return e.Message }

// NoAnalyzerMessage is the verdict message when no analysis engine is
// wired: the run ends Inconclusive, so the canary pauses instead of passing.
const NoAnalyzerMessage = "analysis engine not available"

// ErrNotFound is returned for a rollout the runner does not know.
var ErrNotFound = errors.New("rollout not found")

// ErrClosed is returned once the runner is closed.
var ErrClosed = errors.New("runner closed")

// Options configure a Runner.
type Options struct {
	Store   Store   // required
	Traffic Traffic // required
	// Analyzer runs analysis; nil makes every run end Inconclusive with
	// NoAnalyzerMessage.
	Analyzer Analyzer
	// Workloads carries out ScaleWorkloads (Kubernetes mode); nil in
	// standalone mode, where the machine emits none.
	Workloads Workloads
	// Alerter receives alerts; nil only logs them.
	Alerter Alerter
	Logger  *slog.Logger
	// AckTimeout bounds the wait for the xDS ACK of a step's traffic
	// (default 10s); after it the step goes on and says so.
	AckTimeout time.Duration
	// Now stamps alerts and timer deadlines (default time.Now).
	Now func() time.Time
	// Limits bound concurrent canaries; a new canary beyond them waits in
	// a queue (admission.go). Zero: unlimited.
	Limits Limits
	// Tracing makes the spans of steps, pushes, ACKs, analysis runs and
	// verdicts in their commit's trace, and stamps alerts with the trace
	// id; nil is tracing.Off().
	Tracing *tracing.Provider
	// MaxWorkers bounds the goroutines processing rollouts' events at
	// once (default DefaultMaxWorkers); a rollout with events beyond it
	// waits for the next free worker, in turn (queue.go).
	MaxWorkers int
}

// DefaultMaxWorkers is Options.MaxWorkers' default. A commit of
// thousands of rollouts gave each its own worker, nearly all of them
// blocked on their save with the deep stack of rollout.Step (2,000
// goroutines and 42 MiB of stacks at 1,000 rollouts in Kubernetes mode,
// 197 MiB at 5,000; docs/scale.md), while the store takes 64 saves at a
// time. A worker blocks only on its own rollout's I/O (its save, its
// traffic write, an Ahead scale of at most 5 s), never on another
// rollout, so a bound cannot deadlock; it is large enough that a few
// rollouts stuck on a slow apiserver leave hundreds of workers to the
// others.
const DefaultMaxWorkers = 256

// Update is one published status change.
type Update struct {
	Key    api.Key        `json:"key"`
	Seq    uint64         `json:"seq"`
	Status rollout.Status `json:"status"`
}

// Runner executes the state machines of all rollouts.
//
// Lifecycle: New, then Start (loads stored states and resumes them), then
// Submit/Do/Command from any goroutine, then Close.
type Runner struct {
	opts    Options
	log     *slog.Logger
	tracing *tracing.Provider
	tracer  trace.Tracer

	mu       sync.Mutex
	rollouts map[api.Key]*entry
	subs     map[*Subscription]struct{}
	closed   bool
	started  bool
	adm      admissionState
	hosts    hostIndex
	idle     *sync.Cond // signalled when a worker finds its queue empty

	workers sync.WaitGroup
	// nworkers counts the workers (guarded by mu), at most
	// opts.MaxWorkers; ready holds, in turn, the rollouts with events that
	// found every worker busy (guarded by mu), and kick wakes a spare
	// worker for them.
	nworkers int
	ready    []*entry
	kick     chan struct{}
	// spare hands a rollout to a worker waiting between rollouts (work),
	// and quit, closed by Close, ends those waits.
	spare chan *entry
	quit  chan struct{}
	waits sync.WaitGroup // ACK waits and ScaleWorkloads applies
	// scales applies the ScaleWorkloads (scale.go).
	scales scaler
}

// New validates opts and returns a Runner; call Start next.
func New(opts Options) (*Runner, error) {
	if opts.Store == nil {
		return nil, errors.New("runner: no store")
	}
	if opts.Traffic == nil {
		return nil, errors.New("runner: no traffic")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tracing == nil {
		opts.Tracing = tracing.Off()
	}
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = DefaultMaxWorkers
	}
	r := &Runner{
		opts:     opts,
		log:      opts.Logger,
		tracing:  opts.Tracing,
		tracer:   opts.Tracing.TracerProvider().Tracer(tracerName),
		rollouts: map[api.Key]*entry{},
		subs:     map[*Subscription]struct{}{},
		adm:      admissionState{limits: opts.Limits, granting: map[api.Key]bool{}},
		hosts:    newHostIndex(),
		spare:    make(chan *entry),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
	}
	r.idle = sync.NewCond(&r.mu)
	return r, nil
}

// Start loads every stored rollout, replays the alerts of its last
// transition (the outbox drops the ones it already has) and feeds it
// rollout.Restart, which re-arms its timer and analysis runs and pushes its
// traffic again. A rollout whose record cannot be read is logged and
// skipped; the others start.
func (r *Runner) Start(ctx context.Context) error {
	stored, err := r.opts.Store.LoadRollouts()
	if err != nil {
		return fmt.Errorf("start runner: %w", err)
	}
	keys := make([]api.Key, 0, len(stored))
	for k := range stored {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	r.mu.Lock()
	if r.started || r.closed {
		r.mu.Unlock()
		return errors.New("start runner: already started or closed")
	}
	r.started = true
	var resumed []record
	for _, k := range keys {
		rec, err := decodeRecord(stored[k])
		if err != nil {
			r.log.Error("skip stored rollout", "rollout", k.String(), "err", err)
			continue
		}
		rec.State.Key = k
		e := newEntry(rec.State)
		e.stamps = stamps{rec.CreatedAt, rec.PhaseSince}
		for id, d := range rec.Deadlines {
			e.deadlines[id] = d
		}
		r.rollouts[k] = e
		r.adm.resumeTickets(rec.State)
		r.adm.track(rollout.State{}, rec.State)
		r.hosts.track(k, rollout.State{}, rec.State, rec.CreatedAt)
		resumed = append(resumed, rec)
	}
	r.mu.Unlock()
	for _, rec := range resumed {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start runner: %w", err)
		}
		// The alerts go to the outbox before anything the restart does.
		for _, a := range rec.Alerts {
			r.enqueueAlert(rec.State.Key, alert.FromRollout(a, rec.Time))
		}
		r.Submit(rec.State.Key, rollout.Restart{})
	}
	// Queued canaries keep their tickets; free slots go to them after
	// their Restart.
	r.mu.Lock()
	r.admit()
	r.mu.Unlock()
	r.log.Info("runner started", "rollouts", len(resumed))
	return nil
}

// Close stops accepting events, lets every worker finish the event it is
// processing (its state is persisted), then stops timers, analysis runs
// and ACK waits. Queued events not yet processed are dropped (a waiting
// Do or Command returns ErrClosed); their causes (timers, analyses, ACKs)
// are re-created from the stored state on the next Start.
func (r *Runner) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for _, e := range r.rollouts {
		for _, j := range e.queue {
			if j.reply != nil {
				j.reply <- result{state: e.state, err: ErrClosed}
			}
		}
		e.queue = nil
	}
	r.mu.Unlock()
	close(r.quit)
	r.workers.Wait()
	// No worker runs now and none can start, so the entries' timers and
	// runs are ours. They are stopped without r.mu: an analysis' stop waits
	// for a report in flight, and a report takes r.mu to submit.
	r.mu.Lock()
	entries := make([]*entry, 0, len(r.rollouts))
	for _, e := range r.rollouts {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	for _, e := range entries {
		e.stopAll()
	}
	r.mu.Lock()
	for s := range r.subs {
		s.close()
		delete(r.subs, s)
	}
	r.idle.Broadcast()
	r.mu.Unlock()
	r.waits.Wait()
	return nil
}

// Submit queues ev for rollout key and returns at once. A rollout the
// runner does not know yet starts from an empty state.
func (r *Runner) Submit(key api.Key, ev rollout.Event) {
	_ = r.enqueue(key, job{ev: ev}, true)
}

// Do queues ev for key and waits until it has been processed (persisted
// and acted on), returning the rollout's state after it.
func (r *Runner) Do(ctx context.Context, key api.Key, ev rollout.Event) (rollout.State, error) {
	reply := make(chan result, 1)
	if err := r.enqueue(key, job{ev: ev, reply: reply}, true); err != nil {
		return rollout.State{}, err
	}
	select {
	case res := <-reply:
		return res.state, res.err
	case <-ctx.Done():
		return rollout.State{}, fmt.Errorf("%s %s: %w", eventName(ev), key, ctx.Err())
	}
}

// Command runs an operator command on a known rollout and returns its new
// status. A command that does not apply fails with an error wrapping
// rollout.ErrNotAllowed; an unknown rollout with ErrNotFound.
func (r *Runner) Command(ctx context.Context, key api.Key, cmd rollout.CommandKind) (rollout.Status, error) {
	reply := make(chan result, 1)
	if err := r.enqueue(key, job{ev: rollout.Command{Kind: cmd}, reply: reply}, false); err != nil {
		return rollout.Status{}, err
	}
	select {
	case res := <-reply:
		r.mu.Lock()
		defer r.mu.Unlock()
		var times stamps
		if e := r.rollouts[key]; e != nil {
			times = e.stamps
		}
		return statusOf(res.state, times, r.queueAhead()), res.err
	case <-ctx.Done():
		return rollout.Status{}, fmt.Errorf("%s %s: %w", cmd, key, ctx.Err())
	}
}

// State returns the current state of a rollout.
func (r *Runner) State(key api.Key) (rollout.State, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.rollouts[key]
	if !ok || e.state.Seq == 0 {
		return rollout.State{}, false
	}
	return e.state, true
}

// Status returns the status of a rollout, with its place in the canary
// queue when it waits for a slot.
func (r *Runner) Status(key api.Key) (rollout.Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.rollouts[key]
	if !ok || e.state.Seq == 0 {
		return rollout.State{}.Status(), false
	}
	return statusOf(e.state, e.stamps, r.queueAhead()), true
}

// List returns the status of every rollout that has one, sorted by key.
func (r *Runner) List() []rollout.Status {
	r.mu.Lock()
	out := make([]rollout.Status, 0, len(r.rollouts))
	ahead := r.queueAhead()
	for _, e := range r.rollouts {
		if e.state.Seq > 0 {
			out = append(out, statusOf(e.state, e.stamps, ahead))
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Gauges lists every rollout's gauges, in no order, for /metrics: it
// builds no Status, and holds the runner's lock (which every worker takes)
// only while it copies a few fields per rollout.
func (r *Runner) Gauges() []rollout.Gauges {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]rollout.Gauges, 0, len(r.rollouts))
	for _, e := range r.rollouts {
		if e.state.Seq > 0 {
			out = append(out, e.state.Gauges())
		}
	}
	return out
}

// Subscribe returns a subscription to the status changes from now on,
// until its Cancel or Close. It never slows a rollout and never loses a
// rollout's latest status (see Subscription).
func (r *Runner) Subscribe() *Subscription {
	s := newSubscription()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		s.close()
		return s
	}
	r.subs[s] = struct{}{}
	s.cancel = func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.subs[s]; ok {
			delete(r.subs, s)
			s.close()
		}
	}
	return s
}

// publish hands u to every subscriber without blocking; r.mu is held.
func (r *Runner) publish(u Update) {
	for s := range r.subs {
		s.offer(u)
	}
}

// WaitIdle blocks until no rollout has queued or running events, or ctx
// ends. Events that timers, ACKs or analyses submit later are not waited for.
func (r *Runner) WaitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.idle.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		busy := false
		for _, e := range r.rollouts {
			if e.running || len(e.queue) > 0 {
				busy = true
				break
			}
		}
		if !busy || r.closed {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait idle: %w", err)
		}
		r.idle.Wait()
	}
}

func eventName(ev rollout.Event) string {
	if c, ok := ev.(rollout.Command); ok {
		return string(c.Kind)
	}
	return fmt.Sprintf("%T", ev)
}

// KeyedEvent is one rollout's event, for DoAll.
type KeyedEvent struct {
	Key   api.Key
	Event rollout.Event
}

// DoAll submits evs in their order (a change's place in the canary queue
// follows it) and waits until each is processed; different rollouts
// proceed in parallel, and one rollout's events in order. done, when set,
// is called with each event's index and error as it is processed, in
// order. DoAll returns the first error.
func (r *Runner) DoAll(ctx context.Context, evs []KeyedEvent, done func(i int, err error)) error {
	replies := make([]chan result, len(evs))
	for i, ke := range evs {
		replies[i] = make(chan result, 1)
		if err := r.enqueue(ke.Key, job{ev: ke.Event, reply: replies[i]}, true); err != nil {
			return err
		}
	}
	var first error
	for i, reply := range replies {
		var err error
		select {
		case res := <-reply:
			err = res.err
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", eventName(evs[i].Event), evs[i].Key, ctx.Err())
		}
		if done != nil {
			done(i, err)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("%s: %w", evs[i].Key, err)
		}
	}
	return first
}
