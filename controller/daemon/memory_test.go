package daemon

import (
	"runtime/metrics"
	"testing"
)

// TestLoadEnd: memory is returned in the first quiet period after a load,
// again after what a load allocates past a quiet period inside it, and
// never after small bursts, while a load goes on, or when there is little
// to return.
func TestLoadEnd(t *testing.T) {
	const MiB = 1 << 20
	var l loadEnd
	for i, tc := range []struct {
		alloc, returnable uint64
		release           bool
	}{
		{1 * MiB, 0, false},           // idle, nothing to return
		{60 * MiB, 50 * MiB, false},   // a small commit
		{1 * MiB, 50 * MiB, false},    // its end: not a load
		{300 * MiB, 400 * MiB, false}, // a load starts
		{2 * MiB, 600 * MiB, true},    // pauses (a loaded machine)
		{2 * MiB, 20 * MiB, false},    // still quiet: returned already
		{200 * MiB, 300 * MiB, false}, // the load goes on
		{0, 300 * MiB, true},          // and ends
		{40 * MiB, 100 * MiB, false},  // busy
		{200 * MiB, 100 * MiB, false}, // busy, allocating into what the last GC freed
		{1 * MiB, 100 * MiB, false},   // quiet, but little to return
	} {
		if got := l.period(tc.alloc, tc.returnable); got != tc.release {
			t.Errorf("period %d (%d MiB allocated, %d returnable): release %v, want %v", i, tc.alloc/MiB, tc.returnable/MiB, got, tc.release)
		}
	}
}

// TestHeapSamplesExist: every runtime metric the release reads is one the
// runtime has (an unknown name reads as KindBad, which would be 0 bytes).
func TestHeapSamplesExist(t *testing.T) {
	known := map[string]bool{}
	for _, d := range metrics.All() {
		known[d.Name] = true
	}
	for _, name := range heapSamples {
		if !known[name] {
			t.Errorf("runtime/metrics has no %s", name)
		}
	}
}
