package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
)

// Sink is a local alert webhook: the demo gives its URL to the daemon as
// --alert-webhook and shows what arrives. Deliveries are at least once, so
// it keeps one alert per id.
type Sink struct {
	mu     sync.Mutex
	alerts []Received
	seen   map[string]bool
	notify chan struct{} // closed and replaced on every new alert
}

// Received is one alert and when it arrived.
type Received struct {
	alert.Alert
	At time.Time
}

// NewSink returns an empty sink.
func NewSink() *Sink { return &Sink{seen: map[string]bool{}, notify: make(chan struct{})} }

// ServeHTTP takes one alert per POST.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an alert", http.StatusMethodNotAllowed)
		return
	}
	var a alert.Alert
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&a); err != nil {
		http.Error(w, "bad alert: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if !s.seen[a.ID] {
		s.seen[a.ID] = true
		s.alerts = append(s.alerts, Received{Alert: a, At: time.Now()})
		close(s.notify)
		s.notify = make(chan struct{})
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Alerts returns the alerts received so far, in arrival order.
func (s *Sink) Alerts() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.alerts...)
}

// Wait blocks until an alert of event ev has arrived, or ctx ends.
func (s *Sink) Wait(ctx context.Context, ev alert.Event) (Received, error) {
	for {
		s.mu.Lock()
		ch := s.notify
		for _, a := range s.alerts {
			if a.Event == ev {
				s.mu.Unlock()
				return a, nil
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Received{}, fmt.Errorf("wait for %s alert: %w", ev, ctx.Err())
		case <-ch:
		}
	}
}

// Serve answers on lis until ctx ends.
func (s *Sink) Serve(ctx context.Context, lis net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(shut)
	}()
	if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve alert sink: %w", err)
	}
	return nil
}
