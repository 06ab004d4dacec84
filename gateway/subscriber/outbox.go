package subscriber

import (
	"context"
	"sync"
)

// outbox queues the subscriber's requests (ACKs and subscriptions) for one
// sender goroutine, so that the receiving goroutine never blocks on a
// send. Like Envoy, a subscriber must keep reading while a request waits
// for HTTP/2 flow control: sending inline from the receive loop deadlocks
// once the server's window is full while it waits for us to read (seen at
// 2,000 rollouts in e2e/scale).
type outbox struct {
	do func(typ, nonce string, names []string) error

	mu      sync.Mutex
	queue   []request
	pending chan struct{} // one token: the queue is not empty
}

type request struct {
	typ, nonce string
	names      []string
}

func newOutbox(do func(typ, nonce string, names []string) error) *outbox {
	return &outbox{do: do, pending: make(chan struct{}, 1)}
}

// send queues a request; requests go out in the order they were queued.
func (o *outbox) send(typ, nonce string, names []string) {
	o.mu.Lock()
	o.queue = append(o.queue, request{typ: typ, nonce: nonce, names: names})
	o.mu.Unlock()
	select {
	case o.pending <- struct{}{}:
	default:
	}
}

// run sends queued requests until ctx ends (nil) or a send fails.
func (o *outbox) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-o.pending:
		}
		o.mu.Lock()
		batch := o.queue
		o.queue = nil
		o.mu.Unlock()
		for _, r := range batch {
			if err := o.do(r.typ, r.nonce, r.names); err != nil {
				return err
			}
		}
	}
}
