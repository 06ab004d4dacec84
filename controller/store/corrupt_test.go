package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-dev/sluice/api"
)

// populated writes a store with enough rollouts to span many pages and
// closes it, returning its directory.
func populated(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	must(t, err)
	for i := range 300 {
		must(t, s.SaveRollout(api.Key{Namespace: "default", Name: fmt.Sprint("r", i)}, make([]byte, 1000)))
	}
	must(t, s.Close())
	return dir
}

// Damages of a closed file, PageSize a page; pages 0 and 1 are the two
// meta pages.
var damages = []struct {
	name   string
	damage func(t *testing.T, path string)
}{
	{name: "truncated to half", damage: func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		must(t, err)
		must(t, os.Truncate(path, fi.Size()/2))
	}},
	{name: "last page cut off", damage: func(t *testing.T, path string) {
		// The file grows ahead of its data: cut below what the header
		// says is used, not merely below the file's size.
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		must(t, err)
		var used int64
		must(t, db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }))
		must(t, db.Close())
		must(t, os.Truncate(path, used-PageSize))
	}},
	{name: "bits flipped in data pages", damage: func(t *testing.T, path string) {
		flipBits(t, path, 3*PageSize)
	}},
	{name: "both meta pages zeroed", damage: func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		must(t, err)
		defer f.Close()
		_, err = f.WriteAt(make([]byte, 2*PageSize), 0)
		must(t, err)
	}},
}

// flipBits inverts one byte in every 997 from offset on.
func flipBits(t *testing.T, path string, from int) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	for i := from; i < len(b); i += 997 {
		b[i] ^= 0xff
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt(b[from:], int64(from))
	must(t, err)
}

// TestOpenRefusesDamagedFile: a damaged file is a clear error at Open (and
// from Check) naming the file and how to recover, never a panic or a hang.
func TestOpenRefusesDamagedFile(t *testing.T) {
	for _, tt := range damages {
		t.Run(tt.name, func(t *testing.T) {
			dir := populated(t)
			path := filepath.Join(dir, FileName)
			tt.damage(t, path)
			s, err := Open(dir, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open accepted a damaged file")
			}
			assertCorrupt(t, err, path)
			assertCorrupt(t, Check(dir, 0), path)
		})
	}
}

func assertCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v, want ErrCorrupt", err)
	}
	for _, want := range []string{path, "sluice state backup", "rebuild the state from git"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestCheckAcceptsGoodFile: the check passes on a healthy file, so Open
// and Check do not refuse what they should accept.
func TestCheckAcceptsGoodFile(t *testing.T) {
	dir := populated(t)
	must(t, Check(dir, 0))
	s := open(t, dir)
	rs, err := s.LoadRollouts()
	must(t, err)
	if len(rs) != 300 {
		t.Fatalf("%d rollouts", len(rs))
	}
}

// TestPanicFailsTheStore: pages damaged under a running store make bbolt
// panic on the next write. The store turns that into ErrCorrupt, closes
// Failed, and answers every later call at once with the same error instead
// of waiting for a write lock the panic may have left held; Close does not
// hang either.
func TestPanicFailsTheStore(t *testing.T) {
	dir := populated(t)
	s, err := Open(dir, Options{})
	must(t, err)
	// The file is mapped shared: writes through another descriptor are
	// what bbolt reads next.
	flipBits(t, filepath.Join(dir, FileName), 2*PageSize)
	var first error
	for i := 0; i < 100 && first == nil; i++ {
		first = s.SaveRollout(api.Key{Namespace: "default", Name: fmt.Sprint("r", i)}, []byte("new state"))
	}
	if !errors.Is(first, ErrCorrupt) {
		t.Fatalf("writes over damaged pages: %v, want ErrCorrupt", first)
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed not closed")
	}
	if !errors.Is(s.Err(), ErrCorrupt) {
		t.Errorf("Err %v", s.Err())
	}
	done := make(chan error, 1)
	go func() {
		_ = s.SaveRollout(api.Key{Namespace: "default", Name: "later"}, []byte("x"))
		_, err := s.LoadRollouts()
		if err == nil {
			err = s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("later call: %v, want ErrCorrupt", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("calls after the failure hang")
	}
}
