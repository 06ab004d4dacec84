package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunSmall is a smoke run of the benchmark on the scenarios with
// clear answers; the full table comes from `go run ./analysis/judgebench`.
func TestRunSmall(t *testing.T) {
	c := Config{Canaries: 40, Window: 5 * time.Minute, Step: 10 * time.Second, Seed: 9, Workers: 2,
		Only: regexp.MustCompile(`50 req/s|spinnaker`)}
	r := Run(c, Methods)
	tally := func(scenario, method string) Tally {
		for _, tl := range r.Tallies {
			if strings.HasPrefix(tl.Scenario, scenario) && strings.HasPrefix(tl.Method, method) {
				return tl
			}
		}
		t.Fatalf("no tally for %s / %s", scenario, method)
		return Tally{}
	}
	tests := []struct {
		name, scenario, method string
		minDetected, maxFalse  int
		maxMedian              time.Duration
	}{
		{name: "spinnaker#6278 fails with the test-inverted interval", scenario: "spinnaker", method: "Mann-Whitney, test-inverted", minDetected: 40, maxFalse: 0, maxMedian: 10 * c.Step},
		{name: "spinnaker#6278 fails as counts", scenario: "spinnaker", method: "counts, fixed", minDetected: 40, maxFalse: 0, maxMedian: 10 * c.Step},
		{name: "50 req/s 1 %→2 % as counts", scenario: "errors 1 %→2 %", method: "counts, fixed", minDetected: 39, maxFalse: 1, maxMedian: c.Window},
		{name: "50 req/s sequential is at least 2× faster", scenario: "errors 1 %→2 %", method: "counts, sequential", minDetected: 39, maxFalse: 1, maxMedian: c.Window / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tally(tt.scenario, tt.method)
			median, _ := tl.MedianAbortTime()
			if tl.Aborts[Regressed] < tt.minDetected || tl.Aborts[Healthy] > tt.maxFalse || median > tt.maxMedian {
				t.Fatalf("%s: detected %d, false aborts %d, median %s; want ≥ %d, ≤ %d, ≤ %s",
					tt.method, tl.Aborts[Regressed], tl.Aborts[Healthy], median, tt.minDetected, tt.maxFalse, tt.maxMedian)
			}
		})
	}
	// Same seed, same table, whatever the scheduling.
	c.Workers = 1
	again := Run(c, Methods)
	for i := range r.Tallies {
		if again.Tallies[i].Aborts != r.Tallies[i].Aborts || again.Tallies[i].Undecided != r.Tallies[i].Undecided {
			t.Fatalf("not reproducible: %+v vs %+v", again.Tallies[i], r.Tallies[i])
		}
	}
	// -run keeps each canary's random stream.
	c.Only = nil
	all := Run(c, Methods)
	for _, tl := range r.Tallies {
		for _, full := range all.Tallies {
			if full.Scenario == tl.Scenario && full.Method == tl.Method && (full.Aborts != tl.Aborts || full.Undecided != tl.Undecided) {
				t.Fatalf("%s / %s differs with -run: %+v vs %+v", tl.Scenario, tl.Method, tl, full)
			}
		}
	}
	var b strings.Builder
	Print(&b, r, "1.00")
	if !strings.Contains(b.String(), "| scenario | method | detected (regressed) | false aborts (healthy) |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
