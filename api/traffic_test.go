package api

import "testing"

// TestPinsStable checks when each side's cookie rule is live: the canary's
// whenever it has weight, stable's only while a step is in progress.
func TestPinsStable(t *testing.T) {
	pin := &SessionAffinity{CookieName: "sluice-canary", PinStable: true}
	cases := []struct {
		name         string
		affinity     *SessionAffinity
		weights      Weights
		sticky, pins bool
	}{
		{"no affinity", nil, CanaryWeights(10), false, false},
		{"sticky only", &SessionAffinity{CookieName: "sluice-canary"}, CanaryWeights(10), true, false},
		{"canary 0", pin, CanaryWeights(0), false, false},
		{"canary 10", pin, CanaryWeights(10), true, true},
		{"canary 90", pin, CanaryWeights(90), true, true},
		{"canary 100", pin, CanaryWeights(100), true, false},
		// The baseline runs the stable version: a step is still in progress.
		{"baseline, stable 0", pin, CanaryWeights(60).WithBaseline(), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := Traffic{SessionAffinity: tc.affinity, Weights: tc.weights}
			if got := tr.StickyCanary(); got != tc.sticky {
				t.Errorf("StickyCanary() = %v, want %v", got, tc.sticky)
			}
			if got := tr.PinsStable(); got != tc.pins {
				t.Errorf("PinsStable() = %v, want %v", got, tc.pins)
			}
		})
	}
}
