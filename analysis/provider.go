package analysis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// provider takes one measurement of a metric.
type provider interface {
	measure(ctx context.Context, m *Metric) (Result, error)
}

// cleaner is a provider that leaves something behind (the job provider's
// Jobs): cleanup runs once the run's measuring has stopped.
type cleaner interface {
	cleanup()
}

// newProvider builds the provider of a metric of run r. A provider sluice
// does not implement is an error the run shows as the metric's Error.
func (e *Engine) newProvider(r *run, m *Metric) (provider, error) {
	p := m.Provider
	switch {
	case p.Unsupported || p.Kind == "":
		return nil, fmt.Errorf("provider %s is not implemented by sluice", kindName(p.Kind))
	case p.Kind == api.ProviderPrometheus && p.Prometheus != nil:
		return e.newPrometheus(p.Prometheus)
	case p.Kind == api.ProviderWeb && p.Web != nil:
		return e.newWeb(p.Web)
	case p.Kind == api.ProviderJudge && p.Judge != nil:
		return e.newJudge(p.Judge)
	case p.Kind == api.ProviderJob && p.Job != nil:
		return e.newJob(r, m)
	}
	return nil, fmt.Errorf("provider %s is not implemented by sluice", kindName(p.Kind))
}

func kindName(k api.ProviderKind) string {
	if k == "" {
		return "(none)"
	}
	return string(k)
}

// Provider labels of the refusal metrics.
const (
	labelPrometheus = "prometheus"
	labelWeb        = "web"
	labelJudge      = "judge"
)

// client builds a provider's HTTP client. headers and tokenFile (the
// metric's own) go only to target's origin; the engine's token goes only
// to the configured Prometheus; every body is capped at MaxResponseBytes;
// web requests dial through the engine's webGuard.
func (e *Engine) client(provider string, target origin, headers map[string]string, tokenFile string, insecure bool) *http.Client {
	i := 0
	if insecure {
		i = 1
	}
	base := e.transports[i]
	if provider == labelWeb {
		base = e.webTransports[i]
	}
	var rt http.RoundTripper = &limitBodies{
		base:    base,
		limit:   e.maxBody,
		refused: func() { e.metrics.tooLarge.WithLabelValues(provider).Inc() },
	}
	rt = &scopedHeaders{base: rt, origin: target, headers: headers, tokenFile: tokenFile}
	// The daemon's token is for Prometheus; web endpoints bring their own
	// headers.
	if e.token != "" && provider != labelWeb {
		rt = &scopedHeaders{base: rt, origin: e.promOrigin, tokenFile: e.token}
	}
	return &http.Client{Transport: rt}
}

// transport returns the engine client's transport, made to skip TLS
// verification when a metric asks for insecure, and with the engine's own
// limit of connections per endpoint (see endpointConns).
func (e *Engine) transport(insecure bool) http.RoundTripper {
	base := e.http.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return base
	}
	t = t.Clone()
	if insecure {
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the metric asked for it
	}
	// A commit of a thousand canaries starts a thousand measurements of one
	// Prometheus within a second. Unbounded, each found no idle connection
	// and dialled its own (911 connections for 2,001 measurements in
	// docs/scale.md's commit), most of them closed right after (a socket,
	// two goroutines and 8 KB of buffers each, and as many connections
	// for the endpoint to accept). At most endpointConns, all kept between
	// measurements; the others wait for one, within their timeout.
	// Prometheus itself runs 20 queries at once by default
	// (--query.max-concurrency) and queues the rest.
	t.MaxConnsPerHost = endpointConns
	t.MaxIdleConnsPerHost = endpointConns
	t.MaxIdleConns = max(t.MaxIdleConns, 2*endpointConns)
	return t
}

// endpointConns is how many connections the engine opens to one endpoint
// (host and port) at most, and keeps idle between measurements.
const endpointConns = 64

// requestError wraps a provider's request error: it names the limit the
// request ran into (and counts it), and redacts the URL net/http embeds.
func (e *Engine) requestError(provider, what string, timeout time.Duration, err error) error {
	err = redactURLError(err)
	if errors.Is(err, context.DeadlineExceeded) {
		e.metrics.timeouts.WithLabelValues(provider).Inc()
		return fmt.Errorf("%s: no answer within %s (the metric's timeout, or --%s-timeout): %w", what, timeout, timeoutFlag(provider), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func timeoutFlag(provider string) string {
	if provider == labelWeb {
		return "web"
	}
	return "prometheus"
}
