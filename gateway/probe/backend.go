package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BackendOptions configures a Backend.
type BackendOptions struct {
	// Version is the name the backend answers with, normally the image of
	// the rollout version it stands for ("demo/app:v2"). Required.
	Version string
	// FailureRate is the share of requests answered with Unavailable,
	// 0..1. Failures are spread evenly (every fifth request at 0.2), not
	// drawn at random, so a short window shows the configured rate.
	FailureRate float64
	// Latency is added to every request.
	Latency time.Duration
	// Window is the span /stats reports on (default 10s).
	Window time.Duration
	// Registry receives requests_total and request_duration_seconds and is
	// what /metrics serves; nil uses a fresh registry of the backend's own.
	// Two backends cannot share one (their metric names are the same).
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// Backend is a demo and test workload: a gRPC service that answers with
// its version, plus an HTTP endpoint with its counters.
//
// Lifecycle: NewBackend, then Serve once (it blocks until its context
// ends). SetFailureRate and Stats may be called at any time.
type Backend struct {
	opts     BackendOptions
	log      *slog.Logger
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration prometheus.Observer

	failMu sync.Mutex
	fail   float64
	seq    uint64 // requests seen, for spreading failures evenly

	total  atomic.Int64
	errs   atomic.Int64
	recent *window[bool] // true = ok
}

// NewBackend validates opts and registers the backend's metrics.
func NewBackend(opts BackendOptions) (*Backend, error) {
	if opts.Version == "" {
		return nil, errors.New("backend version is empty")
	}
	if opts.FailureRate < 0 || opts.FailureRate > 1 || math.IsNaN(opts.FailureRate) {
		return nil, fmt.Errorf("failure rate %v is not within 0..1", opts.FailureRate)
	}
	if opts.Window <= 0 {
		opts.Window = 10 * time.Second
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{
		opts: opts,
		log:  opts.Logger.With("version", opts.Version),
		reg:  opts.Registry,
		fail: opts.FailureRate,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "requests_total",
			Help: "Probe requests answered, by version and gRPC code.",
		}, []string{"version", "code"}),
		recent: newWindow[bool](opts.Window),
	}
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "request_duration_seconds",
		Help:    "Time to answer a probe request.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"version"})
	for _, c := range []prometheus.Collector{b.requests, hist} {
		if err := b.reg.Register(c); err != nil {
			return nil, fmt.Errorf("register backend metrics: %w", err)
		}
	}
	b.duration = hist.WithLabelValues(opts.Version)
	// Both codes exist from the start, so a rate() over them is defined
	// before the first failure.
	b.requests.WithLabelValues(opts.Version, codes.OK.String())
	b.requests.WithLabelValues(opts.Version, codes.Unavailable.String())
	return b, nil
}

// Version is the name the backend answers with.
func (b *Backend) Version() string { return b.opts.Version }

// SetFailureRate changes the share of failed requests (clamped to 0..1).
func (b *Backend) SetFailureRate(f float64) {
	b.failMu.Lock()
	b.fail = max(0, min(1, f))
	b.failMu.Unlock()
}

// shouldFail spreads failures evenly: request n fails when the running
// total of rate*n crosses an integer.
func (b *Backend) shouldFail() bool {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	n := b.seq
	b.seq++
	return math.Floor(float64(n+1)*b.fail) > math.Floor(float64(n)*b.fail)
}

func (b *Backend) hello(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	start := time.Now()
	_ = grpc.SetTrailer(ctx, metadata.Pairs(VersionKey, b.opts.Version))
	if b.opts.Latency > 0 {
		t := time.NewTimer(b.opts.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
	ok := !b.shouldFail()
	b.record(start, ok)
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "%s: injected failure", b.opts.Version)
	}
	return wrapperspb.String(b.opts.Version), nil
}

func (b *Backend) record(start time.Time, ok bool) {
	code := codes.OK
	if !ok {
		code = codes.Unavailable
		b.errs.Add(1)
	}
	b.total.Add(1)
	b.requests.WithLabelValues(b.opts.Version, code.String()).Inc()
	b.duration.Observe(time.Since(start).Seconds())
	b.recent.add(time.Now(), ok)
}

// Serve answers gRPC on grpcLis and HTTP (/metrics, /stats) on httpLis
// until ctx ends. It closes both listeners.
func (b *Backend) Serve(ctx context.Context, grpcLis, httpLis net.Listener) error {
	gs := grpc.NewServer()
	gs.RegisterService(&serviceDesc, b)
	hs := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(grpcLis) }()
	go func() { errc <- hs.Serve(httpLis) }()
	b.log.Info("probe backend serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	gs.Stop()
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(shut)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve backend %s: %w", b.opts.Version, err)
	}
	return nil
}

// Handler serves /metrics (Prometheus text) and /stats (JSON).
func (b *Backend) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /stats", b.serveStats)
	return mux
}
