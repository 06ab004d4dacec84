package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Where sluice's memory goes in the side-by-side run: a heap and a
// goroutine profile with the Go runtime's own figures at the steady state,
// and again at each new high of its RSS during the change (the last of
// them is the peak's). The poll reads /proc once a second; profiles are
// taken only at a new high, a few times per run.

// MemSnapshot is sluice's memory at one moment.
type MemSnapshot struct {
	AtSeconds       float64 // since the change (0 at the steady state)
	RSSBytes        int64
	HeapInuseBytes  float64 // go_memstats_heap_inuse_bytes
	StackInuseBytes float64 // go_memstats_stack_inuse_bytes
	Goroutines      float64
	// HeapProfile (inuse_space and alloc_space: go tool pprof
	// -sample_index) and GoroutineProfile are kept in the run's directory.
	HeapProfile, GoroutineProfile string
}

// PeerMemory is sluice's memory in the side-by-side run.
type PeerMemory struct {
	Steady     MemSnapshot
	ChangePeak MemSnapshot // the last new high of RSS during the change
}

// memSnapshot reads d's memory now and keeps its profiles under name in
// dir.
func memSnapshot(d *daemon, debugAddr, dir, name string) MemSnapshot {
	m := MemSnapshot{}
	m.RSSBytes, _ = rssBytes(d.pid)
	if s, err := d.scrape(); err == nil {
		m.HeapInuseBytes, m.StackInuseBytes = s.Samples["go_memstats_heap_inuse_bytes"], s.Samples["go_memstats_stack_inuse_bytes"]
		m.Goroutines = s.Samples["go_goroutines"]
	}
	m.HeapProfile = saveProfile(debugAddr, "heap", filepath.Join(dir, "heap-"+name+".pb.gz"))
	m.GoroutineProfile = saveProfile(debugAddr, "goroutine", filepath.Join(dir, "goroutine-"+name+".pb.gz"))
	return m
}

// saveProfile keeps pprof's profile kind at path ("" if it could not).
func saveProfile(debugAddr, kind, path string) string {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s", debugAddr, kind))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || os.WriteFile(path, b, 0o644) != nil {
		return ""
	}
	return path
}

// peakWatch follows d's RSS from the change on and snapshots it at each
// new high of at least peakStep over the last snapshot.
type peakWatch struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak MemSnapshot
}

const peakStep = 4 << 20

func watchPeak(d *daemon, debugAddr, dir string) *peakWatch {
	w := &peakWatch{stop: make(chan struct{})}
	start := time.Now()
	w.wg.Go(func() {
		var high int64
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			rss, err := rssBytes(d.pid)
			if err != nil || rss < high+peakStep {
				continue
			}
			s := memSnapshot(d, debugAddr, dir, "change-peak")
			s.AtSeconds = time.Since(start).Seconds()
			w.peak, high = s, max(rss, s.RSSBytes)
		}
	})
	return w
}

// done stops the watch and returns the peak's snapshot.
func (w *peakWatch) done() MemSnapshot {
	close(w.stop)
	w.wg.Wait()
	return w.peak
}
