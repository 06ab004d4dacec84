package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/api"
)

// prometheusProvider runs an instant query.
type prometheusProvider struct {
	engine  *Engine
	api     promv1.API
	query   string
	timeout time.Duration
	now     func() time.Time
}

// promAPI builds a client for one Prometheus address. headers and
// tokenFile come with the metric and go only to that address; the
// engine's token goes only to the configured Prometheus URL.
func (e *Engine) promAPI(provider, address string, headers map[string]string, tokenFile string, insecure bool) (promv1.API, error) {
	if address == "" {
		return nil, errors.New("prometheus address is empty")
	}
	target, err := parseOrigin(address)
	if err != nil {
		return nil, fmt.Errorf("prometheus address: %w", err)
	}
	if e.token != "" && target != e.promOrigin && headers["Authorization"] == "" && tokenFile == "" {
		e.log.Debug("prometheus token withheld: the address is not --prometheus-url", "address", target.String(), "prometheusURL", e.promOrigin.String())
	}
	client, err := promapi.NewClient(promapi.Config{
		Address: address,
		Client:  e.client(provider, target, headers, tokenFile, insecure),
	})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %s: %w", redactURL(address), redactURLError(err))
	}
	return promv1.NewAPI(client), nil
}

func (e *Engine) newPrometheus(c *api.PrometheusProvider) (provider, error) {
	a, err := e.promAPI(labelPrometheus, c.Address, c.Headers, c.BearerTokenFile, c.Insecure)
	if err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = e.promTimeout
	}
	return &prometheusProvider{engine: e, api: a, query: c.Query, timeout: timeout, now: e.now}, nil
}

func (p *prometheusProvider) measure(ctx context.Context, m *Metric) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	v, _, _, err := p.api.Query(ctx, p.query, p.now(), promv1.WithTimeout(p.timeout))
	if err != nil {
		return Result{}, p.engine.requestError(labelPrometheus, "prometheus query", p.timeout, err)
	}
	return promResult(v, m.nanAware())
}

// promResult turns a query result into a measurement value. An empty
// vector is Inconclusive "no data" (Argo Rollouts #1466 indexed it and
// errored; Flagger reported "no values found"): missing data must neither
// pass nor look like a provider fault. NaN (0/0 when there is no traffic)
// is Inconclusive too, unless the conditions test isNaN themselves.
func promResult(v model.Value, nanAware bool) (Result, error) {
	switch x := v.(type) {
	case *model.Scalar:
		f := float64(x.Value)
		if math.IsNaN(f) && !nanAware {
			return Result{Value: f, Text: "NaN", Phase: PhaseInconclusive, Message: "result is NaN (no traffic?)"}, nil
		}
		return Result{Value: f, Text: formatFloat(f)}, nil
	case model.Vector:
		if len(x) == 0 {
			return Result{Text: "[]", Phase: PhaseInconclusive, Message: "no data"}, nil
		}
		vals := make([]float64, len(x))
		allNaN := true
		for i, s := range x {
			vals[i] = float64(s.Value)
			allNaN = allNaN && math.IsNaN(vals[i])
		}
		// Conditions still see a vector (result[0], as in Argo); people see
		// the one number a typical query returns.
		r := Result{Value: vals, Text: FormatValue(vals)}
		if len(vals) == 1 {
			r.Text = formatFloat(vals[0])
		}
		if allNaN && !nanAware {
			r.Phase, r.Message = PhaseInconclusive, "result is NaN (no traffic?)"
		}
		return r, nil
	case model.Matrix:
		return Result{}, errors.New("query returned a range vector; use an instant query")
	case nil:
		return Result{Text: "", Phase: PhaseInconclusive, Message: "no data"}, nil
	}
	return Result{}, fmt.Errorf("query returned unsupported type %s", v.Type())
}

// nanAware reports whether the metric's conditions handle NaN themselves.
func (m *Metric) nanAware() bool {
	return strings.Contains(m.SuccessCondition, "isNaN") || strings.Contains(m.FailureCondition, "isNaN")
}
