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
// rollouts the RSS a minute after the load was still about 930 MiB, over
// a live heap of about 240 MiB (docs/scale.md, "Commit cost and memory"). When a load has ended, one collection that returns
// the free pages at once (debug.FreeOSMemory) costs about what one of the
// load's collections did.
const (
	loadCheckEvery = 5 * time.Second
	// A period allocating less than quietAlloc is idle. Memory is returned
	// in an idle period when, since the last return, at least loadAlloc
	// was allocated and at least minReturn could be returned: a load
	// paced by a loaded machine has quiet periods in it, and what it
	// allocates after one is returned at its end too.
	quietAlloc = 32 << 20
	loadAlloc  = 128 << 20
	minReturn  = 128 << 20
)

// loadEnd decides when a load has ended: fed each period's allocation and
// how much the heap holds beyond its live objects, it says when to return
// memory.
type loadEnd struct {
	sinceRelease uint64 // allocated since the last release
}

// period takes one period's allocation and the heap's returnable bytes
// (held, free or garbage, beyond the live heap) and reports whether to
// release now.
func (l *loadEnd) period(alloc, returnable uint64) bool {
	l.sinceRelease += alloc
	if alloc >= quietAlloc || l.sinceRelease < loadAlloc || returnable < minReturn {
		return false
	}
	l.sinceRelease = 0
	return true
}

// heapSamples are what releaseAfterLoads reads: the bytes allocated so
// far, then what the heap holds (objects, live or not yet swept; spans
// unused; free pages not yet returned) and the live heap of the last GC.
var heapSamples = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/gc/heap/live:bytes",
}

// releaseAfterLoads returns the heap's free memory to the system each time
// a load ends, until ctx ends.
func releaseAfterLoads(ctx context.Context, log *slog.Logger) error {
	sample := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		sample[i].Name = name
	}
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
		held := sample[1].Value.Uint64() + sample[2].Value.Uint64() + sample[3].Value.Uint64()
		live := sample[4].Value.Uint64()
		if l.period(now-last, held-min(held, live)) {
			start := time.Now()
			debug.FreeOSMemory()
			log.Debug("load ended: returned free memory", "MiB", (held-min(held, live))>>20, "took", time.Since(start))
		}
		last = now
	}
}
