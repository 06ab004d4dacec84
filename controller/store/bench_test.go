package store

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
)

// BenchmarkSaveRollout measures one durable (fsynced) state write, the
// cost the runner pays before acting on every event.
func BenchmarkSaveRollout(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	state := make([]byte, 2048)
	key := api.Key{Namespace: "default", Name: "checkout"}
	for b.Loop() {
		if err := s.SaveRollout(key, state); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOutboxRoundTrip is one alert through the outbox for two sinks:
// enqueue, read pending, mark delivered for both.
func BenchmarkOutboxRoundTrip(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sinks := []string{"webhook:a", "slack:b"}
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("default/checkout/%d/aborted", i)
		i++
		if err := s.EnqueueAlert(alert.Alert{ID: id, Reason: "bench"}, sinks); err != nil {
			b.Fatal(err)
		}
		for _, sink := range sinks {
			if _, err := s.PendingAlerts(sink); err != nil {
				b.Fatal(err)
			}
			if err := s.MarkDelivered(sink, id); err != nil {
				b.Fatal(err)
			}
		}
	}
}
