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
	"golang.org/x/time/rate"
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
	// Rate bounds the requests per second to each sink, with bursts of
	// Burst (a token bucket per sink): an alert storm (a thousand rollouts
	// aborting at once) is spread out instead of tripping the receiver's
	// own limits. Defaults DefaultRate and DefaultBurst; a negative Rate
	// means unlimited.
	Rate  float64
	Burst int
	// MaxRetryAfter caps the pause a sink's Retry-After asks for (default
	// DefaultMaxRetryAfter), so a wrong header cannot mute a sink for days.
	MaxRetryAfter time.Duration
}

// Defaults of the per-sink rate limit and of the longest Retry-After
// honoured.
const (
	DefaultRate          = 10.0
	DefaultBurst         = 50
	DefaultMaxRetryAfter = 15 * time.Minute
)

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
	// limits are the token buckets, one per sink name.
	limits        map[string]*rate.Limiter
	maxRetryAfter time.Duration
	running       sync.Mutex
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
	if opts.Rate == 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	limit := rate.Limit(opts.Rate)
	if opts.Rate < 0 {
		limit = rate.Inf
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = DefaultMaxRetryAfter
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
		limits:  make(map[string]*rate.Limiter, len(opts.Sinks)),

		maxRetryAfter: opts.MaxRetryAfter,
	}
	for _, s := range opts.Sinks {
		if _, dup := d.wake[s.Name()]; dup {
			return nil, fmt.Errorf("alert dispatcher: duplicate sink %s", displayName(s))
		}
		d.wake[s.Name()] = make(chan struct{}, 1)
		d.limits[s.Name()] = rate.NewLimiter(limit, opts.Burst)
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

// work is one sink's loop: send everything pending in order, at most at
// the sink's rate (several alerts per request for a BatchSink); on a
// failure wait and start again from the outbox, so the failed alerts are
// retried first and none is dropped. The wait is the sink's Retry-After
// when it sent one (429 or 503: only this sink pauses), else an exponential
// back-off with jitter. When nothing is pending, sleep until kicked.
func (d *Dispatcher) work(ctx context.Context, s Sink) {
	name := s.Name()
	log := d.log.With("sink", displayName(s))
	backoff := d.min
	for ctx.Err() == nil {
		pending, err := d.outbox.PendingAlerts(name)
		if err != nil {
			log.Error("read alert outbox", "err", err)
		}
		var wait time.Duration
		if err == nil {
			wait = d.sendAll(ctx, s, log, pending, backoff)
		} else {
			wait = jitter(backoff)
		}
		if ctx.Err() != nil {
			return
		}
		if wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
			backoff = min(backoff*2, d.max)
			continue
		}
		backoff = d.min
		select {
		case <-ctx.Done():
			return
		case <-d.wake[name]:
		}
	}
}

// sendAll sends pending in order and returns how long to wait before the
// next attempt: 0 when everything went (or was rejected for good).
func (d *Dispatcher) sendAll(ctx context.Context, s Sink, log *slog.Logger, pending []Alert, backoff time.Duration) time.Duration {
	name, display := s.Name(), displayName(s)
	limiter := d.limits[name]
	size := 1
	if b, ok := s.(BatchSink); ok {
		size = max(b.BatchSize(), 1)
	}
	for len(pending) > 0 {
		batch := pending[:min(size, len(pending))]
		if limiter.Wait(ctx) != nil {
			return 0 // shutting down: the alerts stay pending
		}
		err := d.send(ctx, s, batch)
		if err != nil && ctx.Err() != nil {
			return 0
		}
		if err != nil {
			d.metrics.failures.WithLabelValues(display, failureReason(err)).Inc()
		}
		switch {
		case err != nil && Permanent(err) && len(batch) > 1:
			// One alert may spoil a batch: find it, one request each.
			size = 1
			continue
		case err != nil && !Permanent(err):
			if pause, ok := RetryAfter(err); ok {
				pause = min(pause, d.maxRetryAfter)
				log.Warn("alert sink asks to wait; pausing it", "id", batch[0].ID, "err", err, "retryAfter", pause)
				return pause
			}
			wait := jitter(backoff)
			log.Warn("alert delivery failed", "id", batch[0].ID, "err", err, "retryIn", wait)
			return wait
		case err != nil:
			// Retrying cannot help; giving up keeps the sink's queue moving.
			log.Error("alert rejected by sink, dropping", "id", batch[0].ID, "err", err)
		}
		for _, a := range batch {
			if err := d.outbox.MarkDelivered(name, a.ID); err != nil {
				log.Error("mark alert delivered", "id", a.ID, "err", err)
				return jitter(backoff)
			}
			log.Debug("alert delivered", "id", a.ID, "event", a.Event)
		}
		pending = pending[len(batch):]
	}
	return 0
}

// send delivers a batch: in one request to a BatchSink, else the one alert.
func (d *Dispatcher) send(ctx context.Context, s Sink, batch []Alert) error {
	if b, ok := s.(BatchSink); ok && len(batch) > 1 {
		return b.SendBatch(ctx, batch)
	}
	return s.Send(ctx, batch[0])
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
