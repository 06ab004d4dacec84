package alert

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a delivery attempt failed, the reason label of
// sluice_alert_delivery_failures_total.
const (
	reasonTimeout  = "timeout"  // no answer within the sink's timeout; retried
	reasonError    = "error"    // connection error or retryable answer; retried
	reasonRejected = "rejected" // a 4xx answer; the alert is dropped
	// reasonRateLimited is a 429 answer: the sink pauses (its Retry-After,
	// else the back-off) and the alert is sent again.
	reasonRateLimited = "rate_limited"
)

type dispatcherMetrics struct {
	failures *prometheus.CounterVec
}

func newDispatcherMetrics(reg *prometheus.Registry) (*dispatcherMetrics, error) {
	m := &dispatcherMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_alert_delivery_failures_total",
			Help: "Failed alert delivery attempts, by sink (kind and redacted URL) and reason: timeout, error, rate_limited (all retried), rejected (dropped).",
		}, []string{"sink", "reason"}),
	}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.failures); err != nil {
		return nil, fmt.Errorf("register alert metrics: %w", err)
	}
	return m, nil
}

func failureReason(err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusTooManyRequests:
		return reasonRateLimited
	case Permanent(err):
		return reasonRejected
	case errors.Is(err, context.DeadlineExceeded):
		return reasonTimeout
	}
	return reasonError
}

// displayName is how logs and metrics name a sink: its String when it has
// one (HTTPSink's hides the URL's secrets), else its Name.
func displayName(s Sink) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return s.Name()
}
