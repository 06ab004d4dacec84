package store

import (
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-dev/sluice/controller/alert"
)

func TestOutbox(t *testing.T) {
	al := func(id, reason string) alert.Alert {
		return alert.Alert{ID: id, Event: alert.EventRolloutAborted, Reason: reason}
	}
	both := []string{"hook", "slack"}
	type want map[string][]string // sink -> pending ids in order
	tests := []struct {
		name string
		ops  func(t *testing.T, s *Store)
		want want
	}{
		{"enqueue keeps order per sink", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("b", ""), both))
			must(t, s.EnqueueAlert(al("a", ""), both))
			must(t, s.EnqueueAlert(al("c", ""), []string{"hook"}))
		}, want{"hook": {"b", "a", "c"}, "slack": {"b", "a"}}},
		{"same id twice is a no-op", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("a", "first"), both))
			must(t, s.EnqueueAlert(al("b", ""), both))
			must(t, s.EnqueueAlert(al("a", "second"), both))
		}, want{"hook": {"a", "b"}, "slack": {"a", "b"}}},
		{"delivered to one sink only", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("a", ""), both))
			must(t, s.MarkDelivered("hook", "a"))
		}, want{"hook": nil, "slack": {"a"}}},
		{"re-enqueue after delivery does not resend", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("a", ""), both))
			must(t, s.MarkDelivered("hook", "a"))
			must(t, s.MarkDelivered("slack", "a"))
			must(t, s.EnqueueAlert(al("a", ""), both))
		}, want{"hook": nil, "slack": nil}},
		{"re-enqueue reaches a new sink", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("a", ""), []string{"hook"}))
			must(t, s.MarkDelivered("hook", "a"))
			must(t, s.EnqueueAlert(al("a", ""), both))
		}, want{"hook": nil, "slack": {"a"}}},
		{"mark twice and unknown ids", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("a", ""), both))
			must(t, s.MarkDelivered("hook", "a"))
			must(t, s.MarkDelivered("hook", "a"))
			must(t, s.MarkDelivered("hook", "never"))
			must(t, s.EnqueueAlert(al("never", ""), both))
		}, want{"hook": nil, "slack": {"a", "never"}}},
		{"retain drops removed sinks", func(t *testing.T, s *Store) {
			must(t, s.EnqueueAlert(al("a", ""), both))
			must(t, s.EnqueueAlert(al("b", ""), []string{"slack"}))
			must(t, s.RetainSinks([]string{"hook"}))
		}, want{"hook": {"a"}, "slack": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{})
			must(t, err)
			tt.ops(t, s)
			check := func(s *Store) {
				for sink, ids := range tt.want {
					p, err := s.PendingAlerts(sink)
					must(t, err)
					var got []string
					for _, a := range p {
						got = append(got, a.ID)
					}
					if !slices.Equal(got, ids) {
						t.Errorf("pending %s = %v, want %v", sink, got, ids)
					}
				}
			}
			check(s)
			must(t, s.Close())
			check(open(t, dir))
		})
	}
}

func TestOutboxKeepsFirstBodyAndCleansUp(t *testing.T) {
	s := open(t, t.TempDir())
	must(t, s.EnqueueAlert(alert.Alert{ID: "x", Reason: "first", Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}, []string{"a", "b"}))
	must(t, s.EnqueueAlert(alert.Alert{ID: "x", Reason: "second"}, []string{"a", "b"}))
	p, err := s.PendingAlerts("a")
	must(t, err)
	if len(p) != 1 || p[0].Reason != "first" || !p[0].Time.Equal(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("pending = %+v, want the first body", p)
	}
	must(t, s.MarkDelivered("a", "x"))
	must(t, s.MarkDelivered("b", "x"))
	n := 0
	_ = s.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucketAlerts).Stats().KeyN; return nil })
	if n != 0 {
		t.Errorf("%d alert records left after every sink got them", n)
	}
}

func TestPruneDelivered(t *testing.T) {
	s := open(t, t.TempDir())
	now := time.Now()
	must(t, s.markDelivered("hook", "old", now.Add(-48*time.Hour)))
	must(t, s.markDelivered("hook", "new", now))
	must(t, s.markDelivered("slack", "old", now.Add(-48*time.Hour)))
	n, err := s.PruneDelivered(now.Add(-24 * time.Hour))
	must(t, err)
	if n != 2 {
		t.Errorf("pruned %d, want 2", n)
	}
	// A pruned id may be sent again; a remembered one may not.
	must(t, s.EnqueueAlert(alert.Alert{ID: "old"}, []string{"hook"}))
	must(t, s.EnqueueAlert(alert.Alert{ID: "new"}, []string{"hook"}))
	p, _ := s.PendingAlerts("hook")
	if len(p) != 1 || p[0].ID != "old" {
		t.Errorf("pending after prune = %+v, want only old", p)
	}
}

func TestOpenPrunesOldDeliveries(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	must(t, err)
	must(t, s.markDelivered("hook", "ancient", time.Now().Add(-2*time.Hour)))
	must(t, s.markDelivered("hook", "recent", time.Now()))
	must(t, s.Close())
	s, err = Open(dir, Options{DeliveredRetention: time.Hour})
	must(t, err)
	defer s.Close()
	must(t, s.EnqueueAlert(alert.Alert{ID: "ancient"}, []string{"hook"}))
	must(t, s.EnqueueAlert(alert.Alert{ID: "recent"}, []string{"hook"}))
	p, _ := s.PendingAlerts("hook")
	if len(p) != 1 || p[0].ID != "ancient" {
		t.Errorf("pending = %+v, want only the id forgotten at Open", p)
	}
}
