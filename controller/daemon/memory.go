package daemon

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning a load's memory: applying a large commit (or loading ten
// thousand rollouts at start) allocates gigabytes in a few seconds, and the
// heap grows to hold that garbage. Once the daemon is idle it allocates
// almost nothing, so no collection runs until the runtime's forced one
// (every 2 minutes) and the scavenger hands pages back slowly: at 10,000
// rollouts the idle RSS stayed near 930 MiB for minutes over a live heap
// of about 240 MiB. When a load has ended, one collection that returns
// the free pages at once (debug.FreeOSMemory) costs about what one of the
// load's collections did.
const (
	loadCheckEvery = 5 * time.Second
	// A period allocating less than quietAlloc is idle; a load is
	// loadAlloc or more allocated since the last release.
	quietAlloc = 32 << 20
	loadAlloc  = 512 << 20
)

// loadEnd decides when a load has ended: fed the bytes allocated in each
// period, it says when to return memory.
type loadEnd struct {
	sinceRelease uint64 // allocated since the last release
}

// period takes one period's allocation and reports whether to release now.
func (l *loadEnd) period(alloc uint64) bool {
	if alloc >= quietAlloc {
		l.sinceRelease += alloc
		return false
	}
	if l.sinceRelease < loadAlloc {
		return false
	}
	l.sinceRelease = 0
	return true
}

// releaseAfterLoads returns the heap's free memory to the system each time
// a load ends, until ctx ends.
func releaseAfterLoads(ctx context.Context, log *slog.Logger) error {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	last := sample[0].Value.Uint64()
	var l loadEnd
	t := time.NewTicker(loadCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		metrics.Read(sample)
		now := sample[0].Value.Uint64()
		if l.period(now - last) {
			start := time.Now()
			debug.FreeOSMemory()
			log.Debug("load ended: returned free memory", "took", time.Since(start))
		}
		last = now
	}
}
