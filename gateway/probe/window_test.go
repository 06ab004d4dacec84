package probe

import (
	"maps"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name string
		adds []time.Duration // offsets of "a" events
		now  time.Duration
		want map[string]int
	}{
		{"empty", nil, 0, map[string]int{}},
		{"inside", []time.Duration{0, time.Second, 9 * time.Second}, 9 * time.Second, map[string]int{"a": 3}},
		{"oldest bucket slides out", []time.Duration{0, 5 * time.Second}, 10 * time.Second, map[string]int{"a": 1}},
		{"all expired", []time.Duration{0, time.Second}, 30 * time.Second, map[string]int{}},
		{"future ignored", []time.Duration{20 * time.Second}, 10 * time.Second, map[string]int{}},
		{"reused slot is reset", []time.Duration{0, 10 * time.Second}, 10 * time.Second, map[string]int{"a": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow[string](10 * time.Second)
			for _, d := range tt.adds {
				w.add(at(d), "a")
			}
			if got := w.sum(at(tt.now)); !maps.Equal(got, tt.want) {
				t.Fatalf("sum = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWindowResetForgetsCallsInFlight: a call that started before a reset
// and ends after it was routed before the change the reset marks, so it is
// not counted; one that started after is.
func TestWindowResetForgetsCallsInFlight(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	w := newWindow[string](10 * time.Second)
	w.reset(t0.Add(time.Second))
	w.addStarted(t0, t0.Add(2*time.Second), "before")
	w.addStarted(t0.Add(1500*time.Millisecond), t0.Add(2*time.Second), "after")
	if got, want := w.sum(t0.Add(3*time.Second)), map[string]int{"after": 1}; !maps.Equal(got, want) {
		t.Fatalf("sum = %v, want %v", got, want)
	}
}
