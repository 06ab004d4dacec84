package runner

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// entry is one rollout in the runner. state, queue and running are guarded
// by Runner.mu; timers, runs and ackCancel belong to the rollout's worker
// (at most one at a time), and to Close once every worker has stopped.
type entry struct {
	key     api.Key
	state   rollout.State
	queue   []job
	running bool

	timers    map[string]*time.Timer
	deadlines map[string]time.Time
	runs      map[string]*analysisRun
	ackCancel context.CancelFunc
	// scaleCancel stops the retries of the latest ScaleWorkloads;
	// scaleDone is closed once they have stopped.
	scaleCancel context.CancelFunc
	scaleDone   chan struct{}
	// saveFailures counts consecutive failed saves, for the retry back-off.
	saveFailures int
	// step is the span of the canary step running now (trace.go).
	step *openStep
	// stamps are the times stored with the state (record.go); guarded by
	// Runner.mu like state.
	stamps stamps
	// specs holds the JSON of the specs last stored, while a canary runs
	// (record.go); the worker's.
	specs specCache
}

// Back-off of an internal event whose new state could not be persisted.
const (
	persistRetryMin = 100 * time.Millisecond
	persistRetryMax = 30 * time.Second
)

func newEntry(s rollout.State) *entry {
	return &entry{key: s.Key, state: s, timers: map[string]*time.Timer{}, deadlines: map[string]time.Time{}, runs: map[string]*analysisRun{}}
}

// deadlinesFor computes the deadline of the state's armed timer: the one
// already known, or now plus its duration when this transition arms it.
func (e *entry) deadlinesFor(next rollout.State, now time.Time) map[string]time.Time {
	if next.Timer == nil {
		return nil
	}
	d, ok := e.deadlines[next.Timer.ID]
	if !ok {
		d = now.Add(next.Timer.Duration)
	}
	return map[string]time.Time{next.Timer.ID: d}
}

// stopAll stops the rollout's timers, analysis runs and ACK wait.
func (e *entry) stopAll() {
	for id, t := range e.timers {
		t.Stop()
		delete(e.timers, id)
	}
	for name, run := range e.runs {
		run.halt()
		delete(e.runs, name)
	}
	if e.ackCancel != nil {
		e.ackCancel()
		e.ackCancel = nil
	}
	if e.scaleCancel != nil {
		e.scaleCancel()
		e.scaleCancel = nil
	}
	// An open step span is dropped, not ended: the step has not ended, and
	// the next Start opens it again under the same id.
	e.step = nil
}

// job is one queued event; reply, when set, receives the outcome.
type job struct {
	ev    rollout.Event
	reply chan result
}

type result struct {
	state rollout.State
	err   error
}

// enqueue adds j to key's queue and starts the rollout's worker if it is
// not running. With create false, an unknown rollout is ErrNotFound.
// A change gets its place in the canary queue here, in submission order.
func (r *Runner) enqueue(key api.Key, j job, create bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if e := r.rollouts[key]; (e == nil || e.state.Seq == 0) && !create {
		return fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	j.ev = r.adm.stamp(j.ev)
	r.enqueueLocked(key, j)
	return nil
}

// enqueueLocked adds j to key's queue, creating the rollout if needed, and
// gives the rollout a worker; r.mu is held and the runner is open.
func (r *Runner) enqueueLocked(key api.Key, j job) {
	e := r.rollouts[key]
	if e == nil {
		e = newEntry(rollout.State{Key: key})
		r.rollouts[key] = e
	}
	e.queue = append(e.queue, j)
	if !e.running {
		e.running = true
		r.assignLocked(e)
	}
}

// assignLocked gives e a worker: a spare one, a new one while there are
// fewer than MaxWorkers, else the next one free (ready); r.mu is held.
func (r *Runner) assignLocked(e *entry) {
	select {
	case r.spare <- e: // a worker between rollouts takes it
		return
	default:
	}
	if r.nworkers < r.opts.MaxWorkers {
		r.nworkers++
		r.workers.Add(1)
		go r.work(e)
		return
	}
	r.ready = append(r.ready, e)
	select {
	case r.kick <- struct{}{}: // a worker about to wait spare looks again
	default:
	}
}

// spareFor is how long a worker whose rollout has no more events waits to
// take another rollout before it exits. A commit of a thousand rollouts
// gives each several bursts of events (the change, its ACK, its analysis):
// a new goroutine per burst grew its stack again, page by page, through
// rollout.Step's frames (newstack was 5-9 % of the commit's CPU), while a
// worker kept for the next burst already has it. A second is long enough
// for a busy runner (some worker frees up every few milliseconds, and
// takes whichever rollout is next) and short enough that the workers of
// a load's peak, and their stacks, are gone soon after it.
const spareFor = time.Second

// work drains e's queue, then the next rollout waiting for a worker or
// handed to it, until none comes for spareFor or the runner closes. A
// rollout has at most one worker at a time (e.running), so its events
// keep their order.
func (r *Runner) work(e *entry) {
	defer r.workers.Done()
	idle := time.NewTimer(spareFor)
	defer idle.Stop()
	for e != nil {
		r.drain(e)
		e = r.nextRollout(idle)
	}
}

// nextRollout is the rollout this worker serves next: the first waiting
// for a worker, or one handed to it while it waits spare; nil when it is
// to exit (spareFor without one, or the runner closed), having left the
// count of workers. The waiting rollouts are looked at, under r.mu, just
// before leaving, so that none is left without a worker.
func (r *Runner) nextRollout(idle *time.Timer) *entry {
	if !idle.Stop() {
		select {
		case <-idle.C:
		default:
		}
	}
	idle.Reset(spareFor)
	leaving := false
	for {
		r.mu.Lock()
		if len(r.ready) > 0 {
			e := r.ready[0]
			r.ready[0] = nil
			r.ready = r.ready[1:]
			r.mu.Unlock()
			return e
		}
		if leaving {
			r.nworkers--
			r.mu.Unlock()
			return nil
		}
		r.mu.Unlock()
		select {
		case e := <-r.spare:
			return e
		case <-r.kick:
		case <-idle.C:
			leaving = true
		case <-r.quit:
			leaving = true
		}
	}
}

// drain processes e's events one at a time until its queue is empty.
func (r *Runner) drain(e *entry) {
	for {
		r.mu.Lock()
		if len(e.queue) == 0 || r.closed {
			for _, j := range e.queue {
				if j.reply != nil {
					j.reply <- result{state: e.state, err: ErrClosed}
				}
			}
			e.queue = nil
			e.running = false
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		j := e.queue[0]
		e.queue = e.queue[1:]
		r.mu.Unlock()
		res := r.process(e, j)
		if j.reply != nil {
			j.reply <- res
		}
	}
}

// process runs one event through the machine: Step, persist the new state
// with its alerts (unless the step only counted pods: PodCountOnly),
// publish the status, then carry out the actions. When persisting fails
// nothing is carried out and the state stays as it was.
// A panic is contained to this event of this rollout, except one from the
// store (see save).
func (r *Runner) process(e *entry, j job) (res result) {
	r.mu.Lock()
	old := e.state
	r.mu.Unlock()
	if stamped(j.ev) {
		defer func() {
			r.mu.Lock()
			r.changeProcessed()
			r.mu.Unlock()
		}()
	}
	defer func() {
		if p := recover(); p != nil {
			if sp, ok := p.(storePanic); ok {
				panic(sp) // not this event's fault: crash
			}
			r.log.Error("rollout event panicked", "rollout", e.key.String(), "event", eventName(j.ev), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.mu.Lock()
			cur := e.state
			r.mu.Unlock()
			if _, ok := j.ev.(rollout.SlotGranted); ok {
				// The grant failed: the slot goes back to the queue.
				r.mu.Lock()
				delete(r.adm.granting, e.key)
				r.mu.Unlock()
			}
			res = result{state: cur, err: fmt.Errorf("%s %s: internal error: %v", eventName(j.ev), e.key, p)}
		}
	}()
	if c, ok := j.ev.(rollout.Command); ok {
		if err := old.Allows(c.Kind); err != nil {
			return result{state: old, err: err}
		}
	}
	next, acts := rollout.Step(old, j.ev)
	r.forget(e, j.ev)
	_, granted := j.ev.(rollout.SlotGranted)
	if next.Seq == old.Seq {
		if granted {
			// Nothing was queued any more: the slot is free again.
			r.mu.Lock()
			delete(r.adm.granting, e.key)
			r.admit()
			r.mu.Unlock()
		}
		return result{state: old}
	}
	now := r.opts.Now()
	r.mu.Lock()
	times := e.stamps.next(old, next, now)
	r.mu.Unlock()
	rec := record{State: next, Time: now, Deadlines: e.deadlinesFor(next, now), CreatedAt: times.createdAt, PhaseSince: times.phaseSince}
	for _, a := range acts {
		if n, ok := a.(rollout.Notify); ok {
			rec.Alerts = append(rec.Alerts, n.Alert)
		}
	}
	var err error
	if !rollout.PodCountOnly(old, next, j.ev, acts) {
		// A step that only counted pods is not written (in Kubernetes
		// mode, one write to the apiserver for each pod created or
		// deleted before it is Ready): the next write carries it, and a
		// state lost meanwhile is learnt again from the actuator.
		err = r.persist(e, rec)
	}
	if err != nil {
		err = fmt.Errorf("persist %s: %w", e.key, err)
		if j.reply != nil {
			// The caller (an operator command, a commit) gets the error.
			r.log.Error("persist rollout state; event refused", "rollout", e.key.String(), "event", eventName(j.ev), "err", err)
			return result{state: old, err: err}
		}
		// An internal event (ACK, timer, verdict) must not be lost: try it
		// again later, backing off while the store keeps failing.
		e.saveFailures++
		delay := min(persistRetryMin<<min(e.saveFailures-1, 10), persistRetryMax)
		r.log.Error("persist rollout state; retrying the event", "rollout", e.key.String(), "event", eventName(j.ev), "in", delay, "err", err)
		key, ev := e.key, j.ev
		time.AfterFunc(delay, func() { r.Submit(key, ev) })
		return result{state: old, err: err}
	}
	e.saveFailures = 0
	e.deadlines = rec.Deadlines
	if next.Phase == rollout.PhaseHealthy {
		// Its specs are not stored again until its next change: ten
		// thousand idle rollouts keep no copies.
		e.specs = specCache{}
	}
	r.mu.Lock()
	e.state, e.stamps = next, times
	r.adm.track(old, next)
	r.hosts.track(e.key, old, next, times.createdAt)
	if granted {
		delete(r.adm.granting, e.key) // from now on next.HoldsSlot counts it
	}
	if granted || slotsMoved(old, next) {
		r.admit()
	}
	var ahead map[api.Key]place
	if next.Queued != nil {
		ahead = r.queueAhead()
	}
	r.publish(Update{Key: e.key, Seq: next.Seq, Status: statusOf(next, e.stamps, ahead)})
	r.mu.Unlock()
	r.logTransition(old, next, j.ev)
	r.traceTransition(e, old, next)
	r.execute(e, acts, now)
	return result{state: next}
}

// forget drops what an event reports as finished: a fired timer, a run
// that reached its verdict.
func (r *Runner) forget(e *entry, ev rollout.Event) {
	switch ev := ev.(type) {
	case rollout.TimerFired:
		delete(e.timers, ev.ID)
	case rollout.AnalysisResult:
		if run, ok := e.runs[ev.Run]; ok && ev.Phase.Terminal() {
			run.halt()
			delete(e.runs, ev.Run)
		}
	}
}

func (r *Runner) logTransition(old, next rollout.State, ev rollout.Event) {
	level := slog.LevelDebug
	if old.Phase != next.Phase || old.StepIndex != next.StepIndex || old.Weights != next.Weights {
		level = slog.LevelInfo
	}
	if !r.log.Enabled(context.Background(), level) {
		return // before the arguments are built: an analysis measurement's transition logs at DEBUG
	}
	r.log.Log(context.Background(), level, "rollout transition", "rollout", next.Key.String(), "event", eventName(ev), "seq", next.Seq,
		"phase", string(next.Phase), "step", next.StepIndex, "steps", next.StepCount(),
		"stable", next.Weights.Stable, "canary", next.Weights.Canary, "message", next.Message)
}

// persist writes rec as the rollout's stored state. The record is encoded
// into a pooled buffer, taken back once the store returned (Store's
// SaveRollout keeps no reference to it): a record is a few kilobytes,
// saved on every transition, and a new one each time was a tenth of what a
// commit of a thousand rollouts allocated.
func (r *Runner) persist(e *entry, rec record) error {
	buf := savedRecords.Get().(*[]byte)
	b, err := appendRecord((*buf)[:0], rec, &e.specs)
	if err == nil {
		err = r.save(e.key, b)
	}
	// Not deferred: after a store panic the bytes may still be referenced.
	*buf = b[:0]
	savedRecords.Put(buf)
	return err
}

// savedRecords are persist's buffers.
var savedRecords = sync.Pool{New: func() any { return new([]byte) }}

// storePanic is a panic raised by the store. process lets it through: the
// store's state is unknown after it (bbolt, for one, may keep its write
// lock, so every later write would wait forever), and a daemon that cannot
// persist must stop rather than look healthy. controller/store's Store
// turns bbolt's panics into ErrCorrupt itself (and the daemon exits on
// it); this catches any Store that does not.
type storePanic struct{ value any }

func (p storePanic) String() string { return fmt.Sprintf("state store panicked: %v", p.value) }

// save persists one rollout state, marking a panic from the store so that
// process does not contain it.
func (r *Runner) save(key api.Key, b []byte) error {
	defer func() {
		if p := recover(); p != nil {
			panic(storePanic{value: p})
		}
	}()
	return r.opts.Store.SaveRollout(key, b)
}
