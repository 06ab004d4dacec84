package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/api"
)

// defaultPromTimeout bounds a query whose metric sets no timeout.
const defaultPromTimeout = 30 * time.Second

// prometheusProvider runs an instant query.
type prometheusProvider struct {
	api     promv1.API
	query   string
	timeout time.Duration
	now     func() time.Time
}

func (e *Engine) promAPI(address string, headers map[string]string, tokenFile string, insecure bool) (promv1.API, error) {
	if address == "" {
		return nil, errors.New("prometheus address is empty")
	}
	if tokenFile == "" {
		tokenFile = e.token
	}
	client, err := promapi.NewClient(promapi.Config{
		Address: address,
		Client: &http.Client{
			Transport: &headerTransport{base: e.transport(insecure), headers: headers, tokenFile: tokenFile},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %s: %w", address, err)
	}
	return promv1.NewAPI(client), nil
}

func (e *Engine) newPrometheus(c *api.PrometheusProvider) (provider, error) {
	a, err := e.promAPI(c.Address, c.Headers, c.BearerTokenFile, c.Insecure)
	if err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = defaultPromTimeout
	}
	return &prometheusProvider{api: a, query: c.Query, timeout: timeout, now: e.now}, nil
}

func (p *prometheusProvider) measure(ctx context.Context, m *Metric) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	v, _, _, err := p.api.Query(ctx, p.query, p.now(), promv1.WithTimeout(p.timeout))
	if err != nil {
		return Result{}, fmt.Errorf("prometheus query: %w", err)
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
