package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits bound the time and memory one client can hold on the API server.
// Zero fields take the value of DefaultLimits.
type Limits struct {
	// ReadHeaderTimeout bounds the time to send the request headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the time to send the whole request, body
	// included, so a slow webhook body cannot hold its buffer for long.
	// Event streams lift it once their headers are read.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time to answer a request, so a client that
	// does not read cannot pin a response. Event streams lift it.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections with no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
	// MaxWebhooks bounds the /hook/ requests being served at once, and so
	// the webhook bodies in memory (each at most 1 MiB). Beyond it a hook
	// is answered 503 at once; the next poll still fetches.
	MaxWebhooks int
	// MaxEventStreams bounds the open GET /api/v1/events streams; beyond
	// it a new stream is answered 503.
	MaxEventStreams int
	// MaxEventStreamsPerClient bounds the open event streams of one
	// client (remote IP address), so that one client cannot take every
	// slot of MaxEventStreams; beyond it a new stream is answered 503.
	// Behind a proxy every client has the proxy's address.
	MaxEventStreamsPerClient int
	// MaxConnections bounds the open connections; beyond it a new one
	// takes the place of the longest-idle keep-alive connection (see
	// connLimiter), so /healthz is answered while the cap holds.
	MaxConnections int
}

// DefaultLimits are the limits `sluice run` starts with.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxWebhooks:       16,
		MaxEventStreams:   100,
		// A person has a few dashboard tabs and a `sluice get -w` or two.
		MaxEventStreamsPerClient: 10,
		MaxConnections:           1024,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	pick := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	pick(&l.ReadTimeout, d.ReadTimeout)
	pick(&l.WriteTimeout, d.WriteTimeout)
	pick(&l.IdleTimeout, d.IdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxWebhooks <= 0 {
		l.MaxWebhooks = d.MaxWebhooks
	}
	if l.MaxEventStreams <= 0 {
		l.MaxEventStreams = d.MaxEventStreams
	}
	if l.MaxEventStreamsPerClient <= 0 {
		l.MaxEventStreamsPerClient = d.MaxEventStreamsPerClient
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = d.MaxConnections
	}
	return l
}

// Reasons of sluice_http_refused_total.
const (
	refusedWebhookBusy        = "webhook-busy"
	refusedWebhookReadTimeout = "webhook-read-timeout"
	refusedEventStreamsFull   = "event-streams-full"
	refusedClientStreamsFull  = "event-streams-per-client"
	refusedConnectionEvicted  = "connection-evicted"
	refusedConnectionsFull    = "connections-full"
)

// newRefused registers sluice_http_refused_total on reg, or reuses the one
// a previous handler registered there.
func newRefused(reg *prometheus.Registry) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_refused_total",
		Help: "HTTP requests refused or cut off by a limit, by reason (webhook-busy, webhook-read-timeout, event-streams-full, event-streams-per-client, connection-evicted, connections-full).",
	}, []string{"reason"})
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		c = existing
	}
	// Every reason is exported from the start, so alerts see a 0 first.
	for _, r := range []string{refusedWebhookBusy, refusedWebhookReadTimeout, refusedEventStreamsFull, refusedClientStreamsFull, refusedConnectionEvicted, refusedConnectionsFull} {
		c.WithLabelValues(r)
	}
	return c, nil
}

// NewServer returns the http.Server for h with the timeouts of its Limits,
// its event streams closed on Shutdown. The caller serves it on a
// listener and shuts it down.
func (h *Handler) NewServer() *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: h.limits.ReadHeaderTimeout,
		ReadTimeout:       h.limits.ReadTimeout,
		WriteTimeout:      h.limits.WriteTimeout,
		IdleTimeout:       h.limits.IdleTimeout,
		MaxHeaderBytes:    h.limits.MaxHeaderBytes,
	}
	// Event streams never end on their own: close them so Shutdown returns.
	srv.RegisterOnShutdown(h.CloseStreams)
	return srv
}

// limitHooks serves at most cap(slots) webhooks at once: the rest are
// refused at once rather than queued, since each one being read may hold
// up to 1 MiB. A body cut off by the server's read timeout is counted.
func (h *Handler) limitHooks(next http.Handler) http.Handler {
	slots := make(chan struct{}, h.limits.MaxWebhooks)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			h.refused.WithLabelValues(refusedWebhookBusy).Inc()
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%d webhooks in flight: try again later", h.limits.MaxWebhooks))
			return
		}
		defer func() { <-slots }()
		r.Body = &timeoutCounter{ReadCloser: r.Body, count: func() { h.refused.WithLabelValues(refusedWebhookReadTimeout).Inc() }}
		next.ServeHTTP(w, r)
	})
}

// timeoutCounter calls count once when a read fails on the connection's
// read deadline, which is how the server's ReadTimeout cuts a slow body.
type timeoutCounter struct {
	io.ReadCloser
	once  sync.Once
	count func()
}

func (t *timeoutCounter) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.once.Do(t.count)
	}
	return n, err
}

// streamSlots counts open event streams against MaxEventStreams.
type streamSlots chan struct{}

// take reserves a slot; false when all are in use.
func (s streamSlots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s streamSlots) release() { <-s }

// clientStreams counts the open event streams of each client against
// MaxEventStreamsPerClient.
type clientStreams struct {
	mu   sync.Mutex
	open map[string]int
	max  int
}

func newClientStreams(max int) *clientStreams {
	return &clientStreams{open: map[string]int{}, max: max}
}

// take reserves a slot of client; false when it has max open.
func (c *clientStreams) take(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[client] >= c.max {
		return false
	}
	c.open[client]++
	return true
}

func (c *clientStreams) release(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[client]--; c.open[client] <= 0 {
		delete(c.open, client)
	}
}

// clientOf names the client of a request by its remote IP address (not a
// forwarded-for header, which the client writes itself).
func clientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
