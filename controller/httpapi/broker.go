package httpapi

import (
	"context"
	"sync"

	"github.com/sluice-dev/sluice/api"
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
	recent map[api.Key][]Event
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
		recent: map[api.Key][]Event{},
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
	r := append(b.recent[k], e)
	if len(r) > b.keep {
		r = append([]Event(nil), r[len(r)-b.keep:]...)
	}
	b.recent[k] = r
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
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
	return append([]Event(nil), b.recent[key]...)
}

// Forget drops the history of a rollout that is no longer managed.
func (b *Broker) Forget(key api.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.recent, key)
}
