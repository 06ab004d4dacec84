// Command judgebench measures how well sluice's statistical judge gates
// canaries, next to plain threshold conditions. It simulates canaries
// (default 1,000 per scenario) serving 50 requests/second for a 5-minute
// window next to a baseline with the same traffic: healthy ones, ones
// with a +2 point error-rate regression, and ones with a +20% p99 latency
// regression. Services differ in their typical error rate (0.2-2%) and
// p99 (50-500ms), and during each canary the environment moves both
// sides alike (log-normal, 30% for errors, 10% for latency). The judge
// compares canary with baseline (10s samples, Kayenta defaults); the
// thresholds compare the canary's whole-window values with the service's
// typical values, as a template author would write them.
//
//	go run ./analysis/judgebench [-canaries 1000] [-seed 1]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

func main() {
	c := Config{Thresholds: []Threshold{
		{Name: "threshold: error ≤ typical+1pt, p99 ≤ 1.15×typical", ErrorPoints: 1, LatencyFactor: 1.15},
		{Name: "threshold: error ≤ typical+1pt, p99 ≤ 1.3×typical", ErrorPoints: 1, LatencyFactor: 1.3},
	}}
	flag.IntVar(&c.Canaries, "canaries", 1000, "canaries per scenario")
	flag.IntVar(&c.RPS, "rps", 50, "requests per second to the canary and to the baseline")
	flag.DurationVar(&c.Window, "window", 5*time.Minute, "analysis window")
	flag.DurationVar(&c.Step, "step", 10*time.Second, "judge sample step")
	flag.Uint64Var(&c.Seed, "seed", 1, "random seed")
	flag.IntVar(&c.Workers, "workers", runtime.GOMAXPROCS(0), "parallel workers")
	flag.Parse()
	if err := validate(c); err != nil {
		fmt.Fprintln(os.Stderr, "judgebench:", err)
		os.Exit(2)
	}
	Print(os.Stdout, Run(c))
}

func validate(c Config) error {
	switch {
	case c.Canaries <= 0:
		return fmt.Errorf("-canaries must be positive")
	case c.RPS <= 0:
		return fmt.Errorf("-rps must be positive")
	case c.Step < time.Second || c.Window < c.Step:
		return fmt.Errorf("-step must be at least 1s and -window at least one step")
	}
	return nil
}

// Print writes the result as a Markdown table: the false-abort rate on
// healthy canaries and the detection rate of each regression.
func Print(w io.Writer, r Result) {
	c := r.Config
	fmt.Fprintf(w, "%d canaries per scenario, %d rps, %s window, %s steps (%d samples of %d requests), seed %d, %s\n\n",
		c.Canaries, c.RPS, c.Window, c.Step, int(c.Window/c.Step), c.RPS*int(c.Step/time.Second), c.Seed, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintln(w, "| method | false aborts (healthy) | detected +2 pt errors | detected +20% p99 |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, o := range r.Outcomes {
		n := float64(c.Canaries)
		fmt.Fprintf(w, "| %s | %.1f%% | %.1f%% | %.1f%% |\n", o.Method,
			100*float64(o.Aborts[Healthy])/n, 100*float64(o.Aborts[ErrorRegression])/n, 100*float64(o.Aborts[LatencyRegression])/n)
	}
}
