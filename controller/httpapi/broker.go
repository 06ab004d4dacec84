package httpapi

import (
	"context"
	"sync"

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

// keptEvent is an event as a rollout's history holds it. The history is
// held for every rollout for the daemon's life, so it is kept small: only
// the newest event with a status keeps it whole (in ev); an older one
// keeps its summary (sum, summarized) and ev.Status is nil. With every
// status kept whole (the timeline, analysis runs, routes), a full history
// held 33 KB per rollout, 330 MB at 10,000 rollouts; now 8.4 KB
// (BenchmarkBrokerHistory, which builds every status afresh: the daemon's
// share their versions and phase).
type keptEvent struct {
	ev         Event
	sum        statusSummary
	summarized bool
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

// event is k as published, with the summary as its status when the whole
// one is no longer kept.
func (k keptEvent) event() Event {
	e := k.ev
	if k.summarized {
		e.Status = &RolloutStatus{
			Namespace: e.Namespace, Name: e.Name,
			Phase: k.sum.phase, Message: k.sum.message, Commit: k.sum.commit,
			StableVersion: k.sum.stableVersion, CanaryVersion: k.sum.canaryVersion,
			StepIndex: k.sum.stepIndex, StepCount: k.sum.stepCount, Weights: k.sum.weights, Aborted: k.sum.aborted,
		}
	}
	return e
}

// remember adds e to a rollout's history r, the oldest event leaving once
// there are keep: r grows to keep and no further (the events move down in
// place). The event that held the whole status until e keeps its summary.
func (b *Broker) remember(r []keptEvent, e Event) []keptEvent {
	if e.Status != nil {
		for i := len(r) - 1; i >= 0; i-- {
			if k := &r[i]; k.ev.Status != nil {
				k.sum, k.summarized, k.ev.Status = summarize(k.ev.Status), true, nil
				break
			}
		}
	}
	if len(r) < b.keep {
		if len(r) == cap(r) { // grown by hand: append would double past keep
			grown := make([]keptEvent, len(r), min(max(2*cap(r), 4), b.keep))
			copy(grown, r)
			r = grown
		}
		return append(r, keptEvent{ev: e})
	}
	copy(r, r[1:])
	r[len(r)-1] = keptEvent{ev: e}
	return r
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
		out[i] = k.event()
	}
	return out
}

// Forget drops the history of a rollout that is no longer managed.
func (b *Broker) Forget(key api.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.recent, key)
}
