// Command judgebench measures how well sluice's statistical judge gates
// canaries at low traffic, next to a plain threshold and the judge as it
// was before issue 15. Each scenario simulates canaries (default 1,000)
// healthy and regressed, next to a baseline, over a 5-minute window of
// 10-second steps: error rates at 1, 5 and 50 requests per second per
// version, a canary that only gets its 10 % share of a quiet service, a
// discrete per-step gauge, and spinnaker#6278's case. The environment
// moves the error rate of both sides alike (log-normal, 30 % per canary
// and 10 % per step). Every method judges the same canaries with
// Kayenta's defaults (confidence 0.98, tolerance 0.25).
//
//	go run ./analysis/judgebench [-canaries 1000] [-seed 1] [-run REGEXP]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

func main() {
	var c Config
	var only string
	flag.IntVar(&c.Canaries, "canaries", 1000, "canaries per scenario, healthy and regressed each")
	flag.DurationVar(&c.Window, "window", 5*time.Minute, "analysis window")
	flag.DurationVar(&c.Step, "step", 10*time.Second, "judge sample step")
	flag.Uint64Var(&c.Seed, "seed", 1, "random seed")
	flag.IntVar(&c.Workers, "workers", runtime.GOMAXPROCS(0), "parallel workers")
	flag.StringVar(&only, "run", "", "only the scenarios whose name matches this regular expression")
	flag.Parse()
	if err := validate(&c, only); err != nil {
		fmt.Fprintln(os.Stderr, "judgebench:", err)
		os.Exit(2)
	}
	Print(os.Stdout, Run(c, Methods), loadAverage())
}

func validate(c *Config, only string) error {
	switch {
	case c.Canaries <= 0:
		return fmt.Errorf("-canaries must be positive")
	case c.Step < time.Second || c.Window < c.Step:
		return fmt.Errorf("-step must be at least 1s and -window at least one step")
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		c.Only = re
	}
	return nil
}

// loadAverage is the machine's 1-minute load, to note with the timings.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// Print writes the result as a Markdown table, one row per scenario and
// method.
func Print(w io.Writer, r Result, load string) {
	c := r.Config
	fmt.Fprintf(w, "%d canaries per scenario (healthy and regressed each), %s window, %s steps, seed %d; %s on %d workers, load average %s at the end\n\n",
		c.Canaries, c.Window, c.Step, c.Seed, r.Elapsed.Round(time.Millisecond), max(c.Workers, 1), load)
	fmt.Fprintln(w, "| scenario | method | detected (regressed) | false aborts (healthy) | undecided healthy / regressed | median time to a failing verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	n := float64(c.Canaries)
	pct := func(k int) string { return fmt.Sprintf("%.1f %%", 100*float64(k)/n) }
	for _, t := range r.Tallies {
		median := "—"
		if d, ok := t.MedianAbortTime(); ok {
			median = d.String()
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s / %s | %s |\n", t.Scenario, t.Method,
			pct(t.Aborts[Regressed]), pct(t.Aborts[Healthy]), pct(t.Undecided[Healthy]), pct(t.Undecided[Regressed]), median)
	}
}
