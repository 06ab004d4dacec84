package daemon

import "testing"

// TestLoadEnd: memory is returned once per load, in the first quiet period
// after it, and never after small bursts or while the load goes on.
func TestLoadEnd(t *testing.T) {
	const MiB = 1 << 20
	var l loadEnd
	for i, tc := range []struct {
		alloc   uint64
		release bool
	}{
		{1 * MiB, false},   // idle, nothing to return
		{100 * MiB, false}, // a small commit
		{1 * MiB, false},   // its end: not a load
		{300 * MiB, false}, // a load starts (400 MiB with the commit)
		{300 * MiB, false}, // goes on
		{2 * MiB, true},    // ends
		{2 * MiB, false},   // still idle: returned already
		{600 * MiB, false}, // the next load
		{0, true},
	} {
		if got := l.period(tc.alloc); got != tc.release {
			t.Errorf("period %d (%d MiB allocated): release %v, want %v", i, tc.alloc/MiB, got, tc.release)
		}
	}
}
