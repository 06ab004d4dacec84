package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/util/jsonpath"

	"github.com/sluice-dev/sluice/api"
)

// webProvider fetches JSON and extracts a value with a Kubernetes-style
// JSONPath ("{$.data.ok}"), as Argo's web provider does.
type webProvider struct {
	engine  *Engine
	client  *http.Client
	cfg     api.WebProvider
	path    *jsonpath.JSONPath
	timeout time.Duration
}

func (e *Engine) newWeb(c *api.WebProvider) (provider, error) {
	if c.URL == "" {
		return nil, errors.New("web url is empty")
	}
	expr := c.JSONPath
	if expr == "" {
		expr = "{$}"
	}
	jp := jsonpath.New("metric")
	if err := jp.Parse(expr); err != nil {
		return nil, fmt.Errorf("jsonPath %q: %w", c.JSONPath, err)
	}
	target, err := parseOrigin(c.URL)
	if err != nil {
		return nil, fmt.Errorf("web url: %w", err)
	}
	timeout := e.webTimeout
	if c.TimeoutSeconds > 0 {
		timeout = time.Duration(c.TimeoutSeconds) * time.Second
	}
	return &webProvider{
		engine:  e,
		client:  e.client(labelWeb, target, c.Headers, "", c.Insecure),
		cfg:     *c,
		path:    jp,
		timeout: timeout,
	}, nil
}

func (p *webProvider) measure(ctx context.Context, _ *Metric) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	method := p.cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if p.cfg.Body != "" {
		body = strings.NewReader(p.cfg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.URL, body)
	if err != nil {
		return Result{}, fmt.Errorf("web request: %w", redactURLError(err))
	}
	if p.cfg.Body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return Result{}, p.engine.requestError(labelWeb, "web request", p.timeout, err)
	}
	defer resp.Body.Close()
	// The client caps the body at MaxResponseBytes.
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Result{}, p.engine.requestError(labelWeb, "read web response", p.timeout, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return Result{}, fmt.Errorf("web response %s: %s", resp.Status, snippet(data))
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return Result{}, fmt.Errorf("web response is not JSON: %w", err)
	}
	return p.extract(doc)
}

// extract applies the JSONPath. One match is the value itself; several
// are a list; none is Inconclusive "no data", like an empty Prometheus
// result.
func (p *webProvider) extract(doc any) (Result, error) {
	found, err := p.path.FindResults(doc)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return Result{Phase: PhaseInconclusive, Message: "no data: " + err.Error()}, nil
		}
		return Result{}, fmt.Errorf("jsonPath %q: %w", p.cfg.JSONPath, err)
	}
	var vals []any
	for _, set := range found {
		for _, v := range set {
			if v.IsValid() && v.CanInterface() {
				vals = append(vals, v.Interface())
			}
		}
	}
	switch len(vals) {
	case 0:
		return Result{Phase: PhaseInconclusive, Message: "no data"}, nil
	case 1:
		return Result{Value: vals[0], Text: jsonText(vals[0])}, nil
	}
	if fs, ok := floats(vals); ok {
		return Result{Value: fs, Text: FormatValue(fs)}, nil
	}
	return Result{Value: vals, Text: jsonText(vals)}, nil
}

// floats turns a list of JSON numbers into []float64, the shape a vector
// Prometheus result has, so one condition works for both.
func floats(vals []any) ([]float64, bool) {
	out := make([]float64, len(vals))
	for i, v := range vals {
		f, ok := v.(float64)
		if !ok {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

func jsonText(v any) string {
	if f, ok := v.(float64); ok {
		return formatFloat(f)
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}
