package gitwatch

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Fetch results, the values of the result label.
const (
	resultOK    = "ok"
	resultError = "error"
	// resultTimeout is a fetch stopped by Options.Timeout.
	resultTimeout = "timeout"
)

type metrics struct {
	fetch *prometheus.HistogramVec
}

// newMetrics registers the DESIGN §8 metrics on reg. A second watcher on
// the same registry shares the first one's collectors.
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	fetch := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_git_fetch_seconds",
		Help:    "Duration of git fetches of the watched branch, by result (ok, error, timeout).",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"result"})
	if err := reg.Register(fetch); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.HistogramVec)
		if !ok {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		fetch = existing
	}
	return &metrics{fetch: fetch}, nil
}
