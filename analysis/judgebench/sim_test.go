package main

import (
	"strings"
	"testing"
	"time"
)

// TestRunSmall is a smoke run of the benchmark; the full table comes
// from `go run ./analysis/judgebench`.
func TestRunSmall(t *testing.T) {
	c := Config{Canaries: 30, RPS: 50, Window: 5 * time.Minute, Step: 10 * time.Second, Seed: 9, Workers: 2,
		Thresholds: []Threshold{{Name: "threshold", ErrorPoints: 1, LatencyFactor: 1.15}}}
	r := Run(c)
	judge := r.Outcomes[0]
	tests := []struct {
		name string
		sc   Scenario
		min  int
		max  int
	}{
		{name: "healthy canaries pass", sc: Healthy, min: 0, max: 1},
		{name: "error regressions abort", sc: ErrorRegression, min: 29, max: 30},
		{name: "latency regressions abort", sc: LatencyRegression, min: 29, max: 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := judge.Aborts[tt.sc]; n < tt.min || n > tt.max {
				t.Fatalf("judge aborted %d of 30 %s canaries, want %d..%d", n, tt.sc, tt.min, tt.max)
			}
		})
	}
	// Same seed, same table, whatever the scheduling.
	c.Workers = 1
	if again := Run(c); again.Outcomes[0].Aborts != judge.Aborts || again.Outcomes[1].Aborts != r.Outcomes[1].Aborts {
		t.Fatalf("not reproducible: %v vs %v", again.Outcomes, r.Outcomes)
	}
	var b strings.Builder
	Print(&b, r)
	if !strings.Contains(b.String(), "| method | false aborts (healthy) | detected +2 pt errors | detected +20% p99 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
