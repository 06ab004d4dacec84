package store

import (
	"fmt"
	"runtime"
	"sync/atomic"
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

// BenchmarkSaveRolloutsAtOnce is a commit's burst of transitions: 1,000
// rollouts' records of a canary's size (~3.6 KB, two thirds of it its two
// specs) saved by 64 writers at once, so the writes group-commit. Per op:
// one record.
func BenchmarkSaveRolloutsAtOnce(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const rollouts, writers = 1000, 64
	record := make([]byte, 3600)
	for i := range record {
		record[i] = 'a' + byte(i%26)
	}
	keys := make([]api.Key, rollouts)
	for i := range keys {
		keys[i] = api.Key{Namespace: fmt.Sprintf("team-%d", i%10), Name: fmt.Sprintf("service-%04d", i)}
		if err := s.SaveRollout(keys[i], record); err != nil {
			b.Fatal(err)
		}
	}
	b.SetParallelism(writers / max(1, runtime.GOMAXPROCS(0)))
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.SaveRollout(keys[next.Add(1)%rollouts], record); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
