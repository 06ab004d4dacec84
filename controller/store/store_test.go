package store

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestRolloutsRoundTrip(t *testing.T) {
	a := api.Key{Namespace: "default", Name: "checkout"}
	b := api.Key{Namespace: "shop", Name: "cart"}
	tests := []struct {
		name string
		ops  func(t *testing.T, s *Store)
		want map[api.Key][]byte
	}{
		{"empty", func(*testing.T, *Store) {}, map[api.Key][]byte{}},
		{"save two", func(t *testing.T, s *Store) {
			must(t, s.SaveRollout(a, []byte(`{"step":1}`)))
			must(t, s.SaveRollout(b, []byte(`{"step":2}`)))
		}, map[api.Key][]byte{a: []byte(`{"step":1}`), b: []byte(`{"step":2}`)}},
		{"overwrite", func(t *testing.T, s *Store) {
			must(t, s.SaveRollout(a, []byte(`old`)))
			must(t, s.SaveRollout(a, []byte(`new`)))
		}, map[api.Key][]byte{a: []byte(`new`)}},
		{"delete", func(t *testing.T, s *Store) {
			must(t, s.SaveRollout(a, []byte(`x`)))
			must(t, s.SaveRollout(b, []byte(`y`)))
			must(t, s.DeleteRollout(a))
			must(t, s.DeleteRollout(api.Key{Namespace: "no", Name: "such"}))
		}, map[api.Key][]byte{b: []byte(`y`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{})
			must(t, err)
			tt.ops(t, s)
			check := func(s *Store) {
				got, err := s.LoadRollouts()
				must(t, err)
				if !maps.EqualFunc(got, tt.want, func(x, y []byte) bool { return string(x) == string(y) }) {
					t.Errorf("LoadRollouts = %q, want %q", got, tt.want)
				}
				for k, v := range tt.want {
					one, ok, err := s.LoadRollout(k)
					must(t, err)
					if !ok || string(one) != string(v) {
						t.Errorf("LoadRollout(%s) = %q %v, want %q", k, one, ok, v)
					}
				}
			}
			check(s)
			// Everything reported saved must be there after a reopen.
			must(t, s.Close())
			check(open(t, dir))
		})
	}
}

func TestLastCommitSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	must(t, err)
	if c, err := s.LastCommit(); err != nil || c != "" {
		t.Fatalf("fresh LastCommit = %q, %v; want empty", c, err)
	}
	must(t, s.SetLastCommit("9f8d111aaa"))
	must(t, s.Close())
	if c, _ := open(t, dir).LastCommit(); c != "9f8d111aaa" {
		t.Errorf("LastCommit after reopen = %q", c)
	}
}

func TestSecondOpenFailsClearly(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	start := time.Now()
	_, err := Open(dir, Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("second Open took %s, want about the lock timeout", time.Since(start))
	}
	t.Logf("second open: %v", err)
}

func TestMigrations(t *testing.T) {
	v1 := Migrations()
	// v2 renames every rollout state, standing in for a real schema change.
	v2 := append(Migrations(), Migration{To: 2, Name: "wrap states", Apply: func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRollouts)
		var keys [][]byte
		_ = b.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
		for _, k := range keys {
			if err := b.Put(k, append([]byte("v2:"), b.Get(k)...)); err != nil {
				return err
			}
		}
		return nil
	}})
	key := api.Key{Namespace: "default", Name: "checkout"}
	dir := t.TempDir()

	steps := []struct {
		name       string
		migrations []Migration
		wantSchema int
		wantState  string
		wantErr    error
	}{
		{"create at v1", v1, 1, "", nil},
		{"migrate to v2", v2, 2, "v2:s", nil},
		{"reopen v2 is a no-op", v2, 2, "v2:s", nil},
		{"older binary refuses", v1, 0, "", ErrSchemaTooNew},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			s, err := Open(dir, Options{Migrations: st.migrations})
			if st.wantErr != nil {
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("Open err = %v, want %v", err, st.wantErr)
				}
				return
			}
			must(t, err)
			defer s.Close()
			if s.SchemaVersion() != st.wantSchema {
				t.Errorf("schema = %d, want %d", s.SchemaVersion(), st.wantSchema)
			}
			if st.wantState == "" {
				must(t, s.SaveRollout(key, []byte("s")))
				return
			}
			got, _, err := s.LoadRollout(key)
			must(t, err)
			if string(got) != st.wantState {
				t.Errorf("state = %q, want %q", got, st.wantState)
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	s := open(t, t.TempDir())
	const workers, n = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := api.Key{Namespace: "ns", Name: fmt.Sprintf("r%d", w)}
			sink := fmt.Sprintf("sink%d", w%2)
			for i := range n {
				if err := s.SaveRollout(key, fmt.Appendf(nil, "%d", i)); err != nil {
					t.Error(err)
					return
				}
				id := fmt.Sprintf("%s/%d", key, i)
				if err := s.EnqueueAlert(alert.Alert{ID: id}, []string{sink}); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.LoadRollouts(); err != nil {
					t.Error(err)
					return
				}
				if err := s.MarkDelivered(sink, id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	all, err := s.LoadRollouts()
	must(t, err)
	if len(all) != workers {
		t.Fatalf("got %d rollouts, want %d", len(all), workers)
	}
	for k, v := range all {
		if string(v) != fmt.Sprint(n-1) {
			t.Errorf("%s = %q, want the last write %d", k, v, n-1)
		}
	}
	for _, sink := range []string{"sink0", "sink1"} {
		if p, _ := s.PendingAlerts(sink); len(p) != 0 {
			t.Errorf("%s still has %d pending", sink, len(p))
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSaveRolloutKeepsNoReference: the runner reuses a record's buffer once
// SaveRollout returned, so what is stored must not change with it; big
// records, as a canary's, spanning leaves of more than one page too.
func TestSaveRolloutKeepsNoReference(t *testing.T) {
	s := open(t, t.TempDir())
	buf := make([]byte, 3*PageSize)
	keys := make([]api.Key, 20)
	for i := range keys {
		keys[i] = api.Key{Namespace: "default", Name: fmt.Sprint("r", i)}
		for j := range buf {
			buf[j] = byte('a' + i)
		}
		must(t, s.SaveRollout(keys[i], buf[:PageSize/4*(1+i%8)]))
	}
	for j := range buf {
		buf[j] = 'X'
	}
	// One more commit: bbolt writes the pages it touches again.
	must(t, s.SaveRollout(api.Key{Namespace: "default", Name: "last"}, buf[:10]))
	got, err := s.LoadRollouts()
	must(t, err)
	for i, k := range keys {
		want := PageSize / 4 * (1 + i%8)
		if len(got[k]) != want {
			t.Fatalf("%s: %d bytes stored, want %d", k, len(got[k]), want)
		}
		for _, c := range got[k] {
			if c != byte('a'+i) {
				t.Fatalf("%s: stored %q, changed with the buffer after SaveRollout returned", k, got[k][:16])
			}
		}
	}
}

// TestOpenKeepsAnOlderFilesPageSize: a state file created with 4 KiB pages
// (before PageSize) opens, takes writes and keeps its pages.
func TestOpenKeepsAnOlderFilesPageSize(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{PageSize: 4096})
	must(t, err)
	must(t, db.Close())
	key := api.Key{Namespace: "default", Name: "checkout"}
	record := make([]byte, 5000) // more than an old page
	s, err := Open(dir, Options{})
	must(t, err)
	must(t, s.SaveRollout(key, record))
	if got := s.db.Info().PageSize; got != 4096 {
		t.Errorf("page size %d after Open, want the file's 4096", got)
	}
	must(t, s.Close())
	s = open(t, dir)
	rs, err := s.LoadRollouts()
	must(t, err)
	if len(rs[key]) != len(record) {
		t.Fatalf("reopened: %d bytes for %s, want %d", len(rs[key]), key, len(record))
	}
	if got := s.db.Info().PageSize; got != 4096 {
		t.Errorf("page size %d after a reopen, want 4096", got)
	}
}

// TestNewFileHasPageSize: the opposite, so that the test above tells
// something: a new file gets PageSize.
func TestNewFileHasPageSize(t *testing.T) {
	s := open(t, t.TempDir())
	if got := s.db.Info().PageSize; got != PageSize {
		t.Errorf("page size %d, want %d", got, PageSize)
	}
}
