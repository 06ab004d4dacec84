package probe

import (
	"encoding/json"
	"net/http"
	"time"
)

// Stats is the /stats document: totals since start, and rates over the
// sliding window. The rates are omitted while the window holds no request,
// so a jsonPath on them finds nothing and the analysis reads "no data"
// (Inconclusive) instead of a made-up 0 or 1.
type Stats struct {
	Version string `json:"version"`
	// Requests and Errors count the window.
	Requests int `json:"requests"`
	Errors   int `json:"errors"`
	// ErrorRate and SuccessRate are Errors/Requests and its complement.
	ErrorRate   *float64 `json:"errorRate,omitempty"`
	SuccessRate *float64 `json:"successRate,omitempty"`
	// WindowSeconds is the span the window covers.
	WindowSeconds float64 `json:"windowSeconds"`
	// TotalRequests and TotalErrors count since the backend started.
	TotalRequests int64 `json:"totalRequests"`
	TotalErrors   int64 `json:"totalErrors"`
}

// Stats returns the current counters.
func (b *Backend) Stats() Stats {
	c := b.recent.sum(time.Now())
	s := Stats{
		Version:       b.opts.Version,
		Requests:      c[true] + c[false],
		Errors:        c[false],
		WindowSeconds: b.opts.Window.Seconds(),
		TotalRequests: b.total.Load(),
		TotalErrors:   b.errs.Load(),
	}
	if s.Requests > 0 {
		er := float64(s.Errors) / float64(s.Requests)
		sr := 1 - er
		s.ErrorRate, s.SuccessRate = &er, &sr
	}
	return s
}

func (b *Backend) serveStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(b.Stats())
}
