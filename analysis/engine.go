package analysis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/api"
)

// Options configure an Engine.
type Options struct {
	Logger *slog.Logger
	// Registry receives sluice_analysis_metric_value and
	// sluice_analysis_runs_total; nil keeps them private.
	Registry *prometheus.Registry
	// HTTPClient's Transport carries the web provider's and Prometheus
	// queries (nil: http.DefaultTransport); deadlines come from
	// PrometheusTimeout, WebTimeout and the metrics' own timeouts.
	HTTPClient *http.Client
	// BearerTokenFile, when set, is read on every Prometheus query (so a
	// rotated token is picked up) and sent as a bearer token, but only to
	// PrometheusURL's origin (scheme, host and port): never to another
	// address a template names, nor after a redirect to another host.
	// Never logged.
	BearerTokenFile string
	// PrometheusURL is the Prometheus BearerTokenFile belongs to; required
	// with BearerTokenFile.
	PrometheusURL string
	// MaxResponseBytes caps the body of a Prometheus or web response
	// (default DefaultMaxResponseBytes); a larger one is the measurement's
	// Error.
	MaxResponseBytes int64
	// PrometheusTimeout bounds a Prometheus query, and each judge
	// measurement, whose metric sets no timeout (default
	// DefaultPrometheusTimeout).
	PrometheusTimeout time.Duration
	// WebTimeout bounds a web request whose metric sets no timeoutSeconds
	// (default DefaultWebTimeout, Argo's).
	WebTimeout time.Duration
	// WebAllowHosts lets web metrics reach addresses that are refused by
	// default (loopback, link-local, cloud metadata): IP addresses, CIDR
	// prefixes, or host names (allowed whatever they resolve to). It is
	// --analysis-allow-hosts.
	WebAllowHosts []string
	// ErrorRetryInterval is the wait after a failed measurement of a
	// metric that has no interval (Argo: 10s).
	ErrorRetryInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Kubernetes runs the job provider's Jobs (Kubernetes mode); without
	// it a job metric ends in Error.
	Kubernetes kubernetes.Interface
}

// Engine runs analysis runs. It is safe for concurrent use.
type Engine struct {
	log     *slog.Logger
	http    *http.Client
	token   string
	retry   time.Duration
	now     func() time.Time
	metrics *engineMetrics

	promOrigin  origin // where token may go; zero without a token
	maxBody     int64
	promTimeout time.Duration
	webTimeout  time.Duration
	webGuard    *webGuard
	// transports and webTransports are the providers' transports, by
	// insecure (0 verifies TLS), built once: one per provider (per
	// analysis run) dialled again for each run and left its idle
	// connection open for 90 s, a thousand at a time in a large commit.
	transports, webTransports [2]http.RoundTripper

	kube    kubernetes.Interface
	jobPoll func(elapsed time.Duration) time.Duration
}

// Defaults of the provider limits.
const (
	DefaultMaxResponseBytes  = 4 << 20
	DefaultPrometheusTimeout = 30 * time.Second
	DefaultWebTimeout        = 10 * time.Second
)

// New builds an Engine.
func New(opts Options) (*Engine, error) {
	e := &Engine{
		log:   opts.Logger,
		http:  opts.HTTPClient,
		token: opts.BearerTokenFile,
		retry: opts.ErrorRetryInterval,
		now:   opts.Now,

		maxBody:     opts.MaxResponseBytes,
		promTimeout: opts.PrometheusTimeout,
		webTimeout:  opts.WebTimeout,

		kube:    opts.Kubernetes,
		jobPoll: jobPollDelay,
	}
	if e.token != "" {
		if opts.PrometheusURL == "" {
			return nil, errors.New("a prometheus bearer token needs the prometheus url it belongs to")
		}
		o, err := parseOrigin(opts.PrometheusURL)
		if err != nil {
			return nil, fmt.Errorf("prometheus url: %w", err)
		}
		e.promOrigin = o
	}
	guard, err := newWebGuard(opts.WebAllowHosts)
	if err != nil {
		return nil, fmt.Errorf("analysis allow hosts: %w", err)
	}
	e.webGuard = guard
	if e.maxBody <= 0 {
		e.maxBody = DefaultMaxResponseBytes
	}
	if e.promTimeout <= 0 {
		e.promTimeout = DefaultPrometheusTimeout
	}
	if e.webTimeout <= 0 {
		e.webTimeout = DefaultWebTimeout
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.http == nil {
		e.http = &http.Client{Timeout: 30 * time.Second}
	}
	for i, insecure := range []bool{false, true} {
		e.transports[i] = e.transport(insecure)
		e.webTransports[i] = e.webGuard.transport(e.transports[i])
	}
	if e.retry <= 0 {
		e.retry = 10 * time.Second
	}
	if e.now == nil {
		e.now = time.Now
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newEngineMetrics(reg)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	return e, nil
}

// Forget deletes the metric series of a rollout (every metric and phase
// of sluice_analysis_metric_value and sluice_analysis_runs_total), so a
// fleet that churns through rollouts does not keep a series for every
// rollout it ever analysed. Call it once the rollout's runs have stopped:
// a run still measuring would bring its series back.
func (e *Engine) Forget(key api.Key) {
	labels := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	e.metrics.value.DeletePartialMatch(labels)
	e.metrics.runs.DeletePartialMatch(labels)
}

// RunSpec describes one analysis run: an analysis step or a rollout's
// background analysis.
type RunSpec struct {
	// Name identifies the run in status, e.g. "success-rate-3".
	Name string
	// Rollout labels the metrics.
	Rollout api.Key
	// Templates are the resolved templates, in step order.
	Templates []*api.AnalysisTemplate
	// Args are the step's arguments; they override template defaults.
	Args []api.Arg
	// DryRun and MeasurementRetention come from the step and add to the
	// templates' own.
	DryRun               []string
	MeasurementRetention map[string]int
	// Builtins are sluice's own argument values (api.ArgCanary, ArgStable,
	// ArgRollout, ArgNamespace), used when no step arg sets them.
	Builtins map[string]string
}

// Start begins a run in its own goroutines and returns at once. report is
// called from one goroutine at a time: once when the run starts, after
// every measurement, and exactly once with a completed phase, after which
// the run is over. stop ends the run early and waits for its goroutines;
// no report is made after stop returns. stop may be called more than once
// but not from inside report.
func (e *Engine) Start(ctx context.Context, spec RunSpec, report func(RunStatus)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r := e.newRun(spec, report)
	go func() {
		defer close(done)
		r.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
