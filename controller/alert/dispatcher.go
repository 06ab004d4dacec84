package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outbox is the durable queue the Dispatcher drains; the controller store
// implements it. Enqueueing an id that is already pending or delivered for a
// sink is a no-op for that sink.
type Outbox interface {
	EnqueueAlert(a Alert, sinks []string) error
	// PendingAlerts lists the sink's undelivered alerts in enqueue order.
	PendingAlerts(sink string) ([]Alert, error)
	MarkDelivered(sink, id string) error
}

// sinkRetainer is an optional Outbox method: drop the queues of sinks that
// are no longer configured, so they do not pin alerts forever.
type sinkRetainer interface {
	RetainSinks(keep []string) error
}

// Options configure a Dispatcher.
type Options struct {
	Outbox Outbox
	Sinks  []Sink
	Logger *slog.Logger
	// MinBackoff is the first retry delay after a failed delivery (default
	// 500ms); each further failure doubles it up to MaxBackoff (default 1m).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Registry receives sluice_alert_delivery_failures_total; nil keeps it
	// private.
	Registry *prometheus.Registry
}

// Dispatcher delivers the outbox to every sink at least once. Each sink has
// its own worker, so a dead sink only delays itself.
type Dispatcher struct {
	outbox  Outbox
	sinks   []Sink
	names   []string
	log     *slog.Logger
	min     time.Duration
	max     time.Duration
	wake    map[string]chan struct{}
	metrics *dispatcherMetrics
	running sync.Mutex
}

// New validates opts and returns a Dispatcher; call Run to deliver.
func New(opts Options) (*Dispatcher, error) {
	if opts.Outbox == nil {
		return nil, errors.New("alert dispatcher: no outbox")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 500 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	metrics, err := newDispatcherMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		metrics: metrics,
		outbox:  opts.Outbox,
		sinks:   opts.Sinks,
		log:     opts.Logger,
		min:     opts.MinBackoff,
		max:     opts.MaxBackoff,
		wake:    make(map[string]chan struct{}, len(opts.Sinks)),
	}
	for _, s := range opts.Sinks {
		if _, dup := d.wake[s.Name()]; dup {
			return nil, fmt.Errorf("alert dispatcher: duplicate sink %s", displayName(s))
		}
		d.wake[s.Name()] = make(chan struct{}, 1)
		d.names = append(d.names, s.Name())
	}
	return d, nil
}

// Sinks returns the sink names alerts are enqueued for.
func (d *Dispatcher) Sinks() []string { return append([]string(nil), d.names...) }

// Enqueue persists a for every sink and wakes their workers. It returns once
// the alert is durable; delivery happens in Run. Enqueueing an id again is a
// no-op, so a replayed action never sends twice.
func (d *Dispatcher) Enqueue(a Alert) error {
	if a.ID == "" {
		return errors.New("enqueue alert: empty id")
	}
	if len(d.names) == 0 {
		return nil
	}
	if err := d.outbox.EnqueueAlert(a, d.names); err != nil {
		return fmt.Errorf("enqueue alert %s: %w", a.ID, err)
	}
	d.Kick()
	return nil
}

// Kick makes every idle worker look at the outbox again.
func (d *Dispatcher) Kick() {
	for _, ch := range d.wake {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Run delivers until ctx is done. Alerts left pending by a previous process
// are sent first.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.running.TryLock() {
		return errors.New("alert dispatcher: already running")
	}
	defer d.running.Unlock()
	if r, ok := d.outbox.(sinkRetainer); ok {
		if err := r.RetainSinks(d.names); err != nil {
			d.log.Error("drop queues of removed sinks", "err", err)
		}
	}
	var wg sync.WaitGroup
	for _, s := range d.sinks {
		wg.Go(func() { d.work(ctx, s) })
	}
	wg.Wait()
	return nil
}

// work is one sink's loop: send everything pending in order; on a failure
// wait (exponential back-off with jitter) and start again from the outbox,
// so the failed alert is retried first; when nothing is pending, sleep until
// kicked.
func (d *Dispatcher) work(ctx context.Context, s Sink) {
	name := s.Name()
	display := displayName(s)
	log := d.log.With("sink", display)
	backoff := d.min
	for ctx.Err() == nil {
		failed := false
		pending, err := d.outbox.PendingAlerts(name)
		if err != nil {
			log.Error("read alert outbox", "err", err)
			failed = true
		}
		for _, a := range pending {
			if ctx.Err() != nil {
				return
			}
			err := s.Send(ctx, a)
			if err != nil && ctx.Err() != nil {
				return // shutting down: the alert stays pending
			}
			if err != nil {
				d.metrics.failures.WithLabelValues(display, failureReason(err)).Inc()
			}
			if err != nil && !Permanent(err) {
				log.Warn("alert delivery failed", "id", a.ID, "err", err, "retryIn", backoff)
				failed = true
				break
			}
			if err != nil {
				// Retrying cannot help; giving up keeps the sink's queue moving.
				log.Error("alert rejected by sink, dropping", "id", a.ID, "err", err)
			}
			if err := d.outbox.MarkDelivered(name, a.ID); err != nil {
				log.Error("mark alert delivered", "id", a.ID, "err", err)
				failed = true
				break
			}
			log.Debug("alert delivered", "id", a.ID, "event", a.Event)
			backoff = d.min
		}
		if failed {
			if !sleep(ctx, jitter(backoff)) {
				return
			}
			backoff = min(backoff*2, d.max)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake[name]:
		}
	}
}

// jitter spreads retries over [d/2, d) so that sinks failing together do not
// retry in lockstep.
func jitter(d time.Duration) time.Duration {
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
