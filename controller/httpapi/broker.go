package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Buffer is each subscriber's channel size (default 256). A subscriber
	// that falls further behind loses events rather than slowing the
	// publisher, which is the runner.
	Buffer int
	// Keep is how many recent events are kept per rollout (default 20).
	Keep int
}

// Broker fans events out to subscribers and remembers the last few per
// rollout. Publish never blocks. It is safe for concurrent use.
type Broker struct {
	mu     sync.Mutex
	seq    uint64
	subs   map[chan Event]struct{}
	recent map[api.Key][]keptEvent
	buffer int
	keep   int
}

// NewBroker returns an empty Broker.
func NewBroker(opts BrokerOptions) *Broker {
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	if opts.Keep <= 0 {
		opts.Keep = 20
	}
	return &Broker{
		subs:   map[chan Event]struct{}{},
		recent: map[api.Key][]keptEvent{},
		buffer: opts.Buffer,
		keep:   opts.Keep,
	}
}

// Publish numbers e and hands it to every subscriber that has room.
func (b *Broker) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	k := e.Key()
	b.recent[k] = b.remember(b.recent[k], e)
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
		}
	}
	return e
}

// remember adds e to a rollout's history r, the oldest event leaving once
// there are keep: r grows to keep and no further (the events move down in
// place). An event that repeats the newest kept one (repeatedBy) is not
// added: that one keeps its seq and time and takes e's status, so that
// the newest status is still whole. Otherwise the event that held the
// whole status until e lets it go, keeping its summary.
func (b *Broker) remember(r []keptEvent, e Event) []keptEvent {
	if n := len(r); n > 0 && r[n-1].repeatedBy(e) {
		r[n-1].whole = e.Status
		return r
	}
	if e.Status != nil {
		for i := len(r) - 1; i >= 0; i-- {
			if r[i].whole != nil {
				r[i].whole = nil
				break
			}
		}
	}
	k := keep(e)
	if len(r) < b.keep {
		if len(r) == cap(r) { // grown by hand: append would double past keep
			grown := make([]keptEvent, len(r), min(cap(r)+historyGrowth, b.keep))
			copy(grown, r)
			r = grown
		}
		return append(r, k)
	}
	copy(r, r[1:])
	r[len(r)-1] = k
	return r
}

// historyGrowth is how many events a history's slice grows by at a time:
// most rollouts' histories stay short between changes and every one is
// held for the daemon's life, where doubling left up to half of each
// slice unused.
const historyGrowth = 4

// keptEvent is an event as a rollout's history holds it. The history is
// held for every rollout for the daemon's life, so it is kept small: the
// rollout (namespace and name) is the history's key, not repeated in each
// event; an event with a status keeps its summary (sum), and only the
// newest of them also the whole status (whole); an alert, which has no
// status, keeps neither. With every status kept whole (the timeline,
// analysis runs, routes), a full history held 33 KB per rollout, 330 MB at
// 10,000 rollouts (BenchmarkBrokerHistory, which builds every status
// afresh: the daemon's share their versions and phase).
type keptEvent struct {
	seq     uint64
	time    time.Time
	typ     string
	message string
	sum     *statusSummary
	whole   *RolloutStatus
}

func keep(e Event) keptEvent {
	k := keptEvent{seq: e.Seq, time: e.Time, typ: e.Type, message: e.Message, whole: e.Status}
	if e.Status != nil {
		sum := summarize(e.Status)
		k.sum = &sum
	}
	return k
}

// repeatedBy says whether e says nothing k did not: the same type and
// message, and either no status on both or statuses with the same
// summary. Such an event is one sluice get rollout does not show either
// (view.Repeats compares less than the summary): a status event whose
// change is only in what the summary leaves out (pod counts, clients,
// measurements) would otherwise push older events out of the history.
func (k keptEvent) repeatedBy(e Event) bool {
	if k.typ != e.Type || k.message != e.Message || (k.sum == nil) != (e.Status == nil) {
		return false
	}
	return k.sum == nil || *k.sum == summarize(e.Status)
}

// statusSummary is what an older event of the history keeps of its status:
// where the rollout was (phase, step, weights, versions, message), which
// is what sluice get rollout and the dashboard show of past events.
type statusSummary struct {
	phase                        rollout.Phase
	message, commit              string
	stableVersion, canaryVersion string
	stepIndex, stepCount         int32
	weights                      api.Weights
	aborted                      bool
}

func summarize(s *RolloutStatus) statusSummary {
	return statusSummary{
		phase: s.Phase, message: s.Message, commit: s.Commit,
		stableVersion: s.StableVersion, canaryVersion: s.CanaryVersion,
		stepIndex: s.StepIndex, stepCount: s.StepCount, weights: s.Weights, aborted: s.Aborted,
	}
}

// event is k as published for key, with the summary as its status when
// the whole one is no longer kept.
func (k keptEvent) event(key api.Key) Event {
	e := Event{Seq: k.seq, Time: k.time, Namespace: key.Namespace, Name: key.Name, Type: k.typ, Message: k.message, Status: k.whole}
	if e.Status == nil && k.sum != nil {
		s := k.sum
		e.Status = &RolloutStatus{
			Namespace: key.Namespace, Name: key.Name,
			Phase: s.phase, Message: s.message, Commit: s.commit,
			StableVersion: s.stableVersion, CanaryVersion: s.canaryVersion,
			StepIndex: s.stepIndex, StepCount: s.stepCount, Weights: s.weights, Aborted: s.aborted,
		}
	}
	return e
}

// Subscribe implements Backend.Subscribe.
func (b *Broker) Subscribe(ctx context.Context) <-chan Event {
	ch := make(chan Event, b.buffer)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
		close(ch)
	}()
	return ch
}

// Recent implements History.
func (b *Broker) Recent(key api.Key) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.recent[key]
	out := make([]Event, len(kept))
	for i, k := range kept {
		out[i] = k.event(key)
	}
	return out
}

// Forget drops the history of a rollout that is no longer managed.
func (b *Broker) Forget(key api.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.recent, key)
}
