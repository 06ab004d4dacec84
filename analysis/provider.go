package analysis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// provider takes one measurement of a metric.
type provider interface {
	measure(ctx context.Context, m *Metric) (Result, error)
}

// newProvider builds the provider of a metric. A provider sluice does
// not implement is an error the run shows as the metric's Error.
func (e *Engine) newProvider(m *Metric) (provider, error) {
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
	}
	return nil, fmt.Errorf("provider %s is not implemented by sluice", kindName(p.Kind))
}

func kindName(k api.ProviderKind) string {
	if k == "" {
		return "(none)"
	}
	return string(k)
}

// headerTransport adds fixed headers and a bearer token read from a file
// on every request, so a rotated token is picked up without a restart.
type headerTransport struct {
	base      http.RoundTripper
	headers   map[string]string
	tokenFile string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 && t.tokenFile == "" {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	if t.tokenFile != "" {
		b, err := os.ReadFile(t.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("read bearer token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	return t.base.RoundTrip(req)
}

// transport returns the engine client's transport, made to skip TLS
// verification when a metric asks for insecure.
func (e *Engine) transport(insecure bool) http.RoundTripper {
	base := e.http.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if !insecure {
		return base
	}
	if t, ok := base.(*http.Transport); ok {
		t = t.Clone()
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the metric asked for it
		return t
	}
	return base
}
