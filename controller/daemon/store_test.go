package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
)

// TestStoreFailureStopsTheDaemon: the state file is damaged under a
// running daemon; the next write makes bbolt panic. The daemon must not
// carry on unable to write (the runner used to contain the panic while
// bbolt's write lock stayed held): Run returns the store's error, and a
// restart refuses the file with how to recover.
func TestStoreFailureStopsTheDaemon(t *testing.T) {
	w := newWorld(t)
	w.push("v1", map[string]string{"web.yaml": w.rollout("web:v1", 30)})
	d, err := New(Options{
		Repo: w.bare, StateDir: w.stateDir, Interval: 100 * time.Millisecond,
		XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", AckTimeout: 2 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	r := &running{d: d}
	r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })

	damagePages(t, filepath.Join(w.stateDir, store.FileName))
	w.push("v2", map[string]string{"web.yaml": w.rollout("web:v2", 30)})
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Run returned %v, want the store's ErrCorrupt", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon kept running on a failed store")
	}

	_, err = New(Options{Repo: w.bare, StateDir: w.stateDir, XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("restart over the damaged file: %v, want ErrCorrupt", err)
	}
}

// damagePages inverts the low byte of the page id in the header of every
// page after the two meta pages, in place: bbolt maps the file shared, so
// the running daemon sees it, and bbolt checks the id of every page it
// reads, so the next transaction that touches a page panics. (Bytes
// inverted at random offsets were missed when they fell in a page's unused
// space, which made this test pass or fail by the file's layout.)
func damagePages(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = store.PageSize
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := 2 * pageSize; off < len(b); off += pageSize {
		if _, err := f.WriteAt([]byte{b[off] ^ 0xff}, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
}
