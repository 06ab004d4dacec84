package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/sluice-dev/sluice/api"
)

// txid is bbolt's transaction id, which every committed write transaction
// increases by one.
func txid(t *testing.T, s *Store) int {
	t.Helper()
	var id int
	must(t, s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

// saveConcurrently saves n rollouts from n goroutines at once (plus the
// extra keys given) and returns each save's error by key.
func saveConcurrently(s *Store, n int, extra ...api.Key) map[api.Key]error {
	keys := append([]api.Key(nil), extra...)
	for i := range n {
		keys = append(keys, api.Key{Namespace: "ns", Name: fmt.Sprintf("r%04d", i)})
	}
	var mu sync.Mutex
	out := map[api.Key]error{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := s.SaveRollout(k, []byte("state of "+k.String()))
			mu.Lock()
			out[k] = err
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// TestConcurrentSavesShareCommits: many rollouts saved at once are
// committed in far fewer transactions than writes, each write is stored,
// and a write bbolt refuses fails alone.
func TestConcurrentSavesShareCommits(t *testing.T) {
	tooLong := api.Key{Namespace: "ns", Name: strings.Repeat("x", bolt.MaxKeySize)}
	tests := []struct {
		name  string
		n     int
		extra []api.Key
	}{
		{"500 good writes", 500, nil},
		{"one refused among 200", 200, []api.Key{tooLong}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			before := txid(t, s)
			errs := saveConcurrently(s, tt.n, tt.extra...)
			commits := txid(t, s) - before
			for k, err := range errs {
				if k == tooLong {
					if !errors.Is(err, bolterrors.ErrKeyTooLarge) {
						t.Errorf("save of a too long key: %v, want ErrKeyTooLarge", err)
					}
					continue
				}
				if err != nil {
					t.Errorf("save %s: %v", k, err)
				}
			}
			stored, err := s.LoadRollouts()
			must(t, err)
			if len(stored) != tt.n {
				t.Errorf("%d rollouts stored, want %d", len(stored), tt.n)
			}
			for k, v := range stored {
				if string(v) != "state of "+k.String() {
					t.Errorf("%s holds %q", k, v)
				}
			}
			// Each commit waits for an fsync, during which the other
			// goroutines queue: a handful of commits, never one per write.
			if commits > tt.n/4 {
				t.Errorf("%d writes took %d commits; want them grouped (at most %d)", tt.n, commits, tt.n/4)
			}
			t.Logf("%d writes in %d commits", tt.n+len(tt.extra), commits)
		})
	}
}
