package gitwatch

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRepackBesideFetch: while a repack of the cache is in progress (held
// by the test's hook), a webhook-triggered fetch still hands out the new
// commit at once; once the repack ends it is swapped in at the next poll,
// without losing what was fetched meanwhile, and the cache keeps working.
func TestRepackBesideFetch(t *testing.T) {
	u := newUpstream(t)
	u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v0")})
	u.push()
	started, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{}, 8)
	var once sync.Once
	h := startWatcher(t, testOptions(t, u.bare), func(w *Watcher) {
		w.cache.maxPacks = 1
		w.cache.beforeRepack = func() {
			once.Do(func() { close(started) })
			<-release // only the first repack is held: release stays closed
		}
		w.cache.afterRepack = func() { finished <- struct{}{} }
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // so Run can end
		}
	})
	h.next(10 * time.Second)

	push := func(i int) string {
		sha := u.commit(fmt.Sprint("c", i), map[string]string{"a.yaml": rolloutYAML("a", fmt.Sprint("shop/a:v", i))})
		u.push()
		h.w.Trigger()
		return sha
	}
	want := func(i int, sha string) {
		t.Helper()
		r := h.next(10 * time.Second)
		if r.Commit != sha || r.Set.Rollouts[0].Version != fmt.Sprint("shop/a:v", i) {
			t.Fatalf("revision %s version %s, want %s v%d", r.Commit, r.Set.Rollouts[0].Version, sha, i)
		}
	}

	want(1, push(1)) // the second pack: this poll starts a repack
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no repack started")
	}
	want(2, push(2)) // fetched while the repack is held

	close(release)
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the released repack did not end")
	}
	want(3, push(3)) // this poll swaps the repacked copy in first
	if !strings.Contains(h.logs.String(), "git cache repacked") {
		t.Fatalf("no swap logged:\n%s", h.logs)
	}
	want(4, push(4)) // the swapped-in cache fetches
	if s := h.w.Status(); s.LastError != "" {
		t.Errorf("status %+v", s)
	}
	if strings.Contains(h.logs.String(), "corrupt") || strings.Contains(h.logs.String(), "discarded") {
		t.Errorf("the swap damaged the cache:\n%s", h.logs)
	}
	h.stop() // waits for a repack in flight and removes its copy
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(h.w.cache.dir), "*.git.*")); len(left) > 0 {
		t.Errorf("staging directories left: %v", left)
	}
}
