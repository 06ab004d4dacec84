package main

import (
	"math"
	"math/rand/v2"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/api"
)

// Config describes one benchmark run.
type Config struct {
	Canaries int           // per scenario and variant (healthy, regressed)
	Window   time.Duration // analysis window (lookback)
	Step     time.Duration // one judge sample per step
	Seed     uint64
	Workers  int
	// Only, when set, keeps the scenarios whose name matches.
	Only *regexp.Regexp
}

// Kind is what a scenario's metric measures.
type Kind int

// Kinds.
const (
	// ErrorRate: requests per step, each an error with the step's rate.
	// Judged as per-step ratios (Mann-Whitney) or as counts.
	ErrorRate Kind = iota
	// DiscreteGauge: one small whole number per step (retries, restarts
	// or queue depth), Poisson. Judged as samples or, summed, as counts
	// with one step as the unit of exposure.
	DiscreteGauge
	// Spinnaker6278: 10 samples; the canary has 7 of them at 100, the
	// baseline all 1s (spinnaker/spinnaker#6278). Healthy canaries are
	// all 1s too.
	Spinnaker6278
)

// Scenario is a kind of canary, run healthy and regressed.
type Scenario struct {
	Name string
	Kind Kind
	// Requests per second to canary and baseline (ErrorRate).
	CanaryRPS, BaselineRPS float64
	// Rate is the baseline's error rate (ErrorRate) or mean (DiscreteGauge).
	Rate float64
	// Ratio is the regressed canary's rate over the baseline's.
	Ratio float64
}

// Scenarios are the benchmark's canaries. The 10 % share ones split a
// quiet service's 5 req/s between canary (10 %) and stable, the baseline.
var Scenarios = []Scenario{
	{Name: "errors 1 %→3 %, 1 req/s each", Kind: ErrorRate, CanaryRPS: 1, BaselineRPS: 1, Rate: 0.01, Ratio: 3},
	{Name: "errors 1 %→3 %, 5 req/s each", Kind: ErrorRate, CanaryRPS: 5, BaselineRPS: 5, Rate: 0.01, Ratio: 3},
	{Name: "errors 1 %→3 %, canary 10 % of 5 req/s", Kind: ErrorRate, CanaryRPS: 0.5, BaselineRPS: 4.5, Rate: 0.01, Ratio: 3},
	{Name: "errors 1 %→2 %, 50 req/s each", Kind: ErrorRate, CanaryRPS: 50, BaselineRPS: 50, Rate: 0.01, Ratio: 2},
	{Name: "discrete gauge 0.3→0.9 per step", Kind: DiscreteGauge, Rate: 0.3, Ratio: 3},
	{Name: "spinnaker#6278: 7 of 10 at 100 vs all 1", Kind: Spinnaker6278, Rate: 1, Ratio: 70.3},
}

// Variant is healthy or regressed.
type Variant int

// Variants.
const (
	Healthy Variant = iota
	Regressed
)

// Verdict is one method's decision on one canary.
type Verdict struct {
	Abort, Undecided bool
	At               time.Duration // when the verdict was reached
}

// Method judges one canary's data.
type Method struct {
	Name  string
	Judge func(d Data, c Config) Verdict
}

// Data is what a method sees of one canary.
type Data struct {
	Scenario Scenario
	Steps    []analysis.CountStep // per step: events and exposure
	// Canary and Baseline are the per-step samples: error ratios
	// (ErrorRate) or gauge values.
	Canary, Baseline []float64
}

// Tally is one method's outcome on one scenario.
type Tally struct {
	Method, Scenario  string
	Aborts, Undecided [2]int // by Variant
	// AbortTimes of regressed canaries, for the median time to verdict.
	AbortTimes []time.Duration
}

// Result is the table of one run.
type Result struct {
	Config  Config
	Tallies []Tally // by scenario, then method
	Elapsed time.Duration
}

// Run simulates c.Canaries canaries of each scenario and variant, on a
// pool of c.Workers goroutines; every method judges the same canaries.
func Run(c Config, methods []Method) Result {
	start := time.Now()
	var scenarios []Scenario
	var ids []uint64 // index in Scenarios: a canary's random stream does not depend on -run
	for i, s := range Scenarios {
		if c.Only == nil || c.Only.MatchString(s.Name) {
			scenarios = append(scenarios, s)
			ids = append(ids, uint64(i))
		}
	}
	res := Result{Config: c}
	for _, s := range scenarios {
		for _, m := range methods {
			res.Tallies = append(res.Tallies, Tally{Method: m.Name, Scenario: s.Name})
		}
	}
	type job struct {
		sc, idx int
		v       Variant
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(c.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				// One stream per canary: results do not depend on scheduling.
				rng := rand.New(rand.NewPCG(c.Seed, ids[j.sc]<<40|uint64(j.v)<<32|uint64(j.idx)))
				d := simulate(rng, c, scenarios[j.sc], j.v)
				verdicts := make([]Verdict, len(methods))
				for i, m := range methods {
					verdicts[i] = m.Judge(d, c)
				}
				mu.Lock()
				for i, v := range verdicts {
					t := &res.Tallies[j.sc*len(methods)+i]
					switch {
					case v.Abort:
						t.Aborts[j.v]++
						if j.v == Regressed {
							t.AbortTimes = append(t.AbortTimes, v.At)
						}
					case v.Undecided:
						t.Undecided[j.v]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	for sc := range scenarios {
		for _, v := range []Variant{Healthy, Regressed} {
			for i := range c.Canaries {
				jobs <- job{sc, i, v}
			}
		}
	}
	close(jobs)
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// MedianAbortTime is the median time to a failing verdict of the
// regressed canaries that were aborted.
func (t Tally) MedianAbortTime() (time.Duration, bool) {
	if len(t.AbortTimes) == 0 {
		return 0, false
	}
	s := append([]time.Duration(nil), t.AbortTimes...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], true
}

// simulate draws one canary. The environment moves the baseline rate for
// both sides alike: per canary (log-normal, 30 %) and per step (10 %).
func simulate(rng *rand.Rand, c Config, s Scenario, v Variant) Data {
	steps := int(c.Window / c.Step)
	ratio := 1.0
	if v == Regressed {
		ratio = s.Ratio
	}
	d := Data{Scenario: s}
	switch s.Kind {
	case Spinnaker6278:
		d.Canary, d.Baseline = make([]float64, 10), make([]float64, 10)
		for i := range d.Canary {
			d.Canary[i], d.Baseline[i] = 1, 1
		}
		if v == Regressed {
			for _, i := range rng.Perm(10)[:7] {
				d.Canary[i] = 100
			}
		}
		for i := range d.Canary {
			d.Steps = append(d.Steps, analysis.CountStep{CanaryEvents: d.Canary[i], CanaryTotal: 1, BaselineEvents: d.Baseline[i], BaselineTotal: 1})
		}
		return d
	case DiscreteGauge:
		env := s.Rate * math.Exp(0.3*rng.NormFloat64())
		for range steps {
			e := env * math.Exp(0.1*rng.NormFloat64())
			cv, bv := poisson(rng, e*ratio), poisson(rng, e)
			d.Canary, d.Baseline = append(d.Canary, cv), append(d.Baseline, bv)
			d.Steps = append(d.Steps, analysis.CountStep{CanaryEvents: cv, CanaryTotal: 1, BaselineEvents: bv, BaselineTotal: 1})
		}
		return d
	}
	secs := c.Step.Seconds()
	cn, bn := int(math.Round(s.CanaryRPS*secs)), int(math.Round(s.BaselineRPS*secs))
	env := s.Rate * math.Exp(0.3*rng.NormFloat64())
	for range steps {
		e := env * math.Exp(0.1*rng.NormFloat64())
		ce, be := binomial(rng, cn, math.Min(e*ratio, 1)), binomial(rng, bn, e)
		d.Steps = append(d.Steps, analysis.CountStep{CanaryEvents: float64(ce), CanaryTotal: float64(cn), BaselineEvents: float64(be), BaselineTotal: float64(bn)})
		d.Canary = append(d.Canary, ratioOrNaN(ce, cn))
		d.Baseline = append(d.Baseline, ratioOrNaN(be, bn))
	}
	return d
}

// ratioOrNaN is errors/requests, NaN without requests (what Prometheus
// returns for 0/0).
func ratioOrNaN(errors, requests int) float64 {
	if requests == 0 {
		return math.NaN()
	}
	return float64(errors) / float64(requests)
}

// binomial draws Binomial(n, p) by summing Bernoulli trials: n is at most
// a few hundred, so this is fast enough and obviously right.
func binomial(rng *rand.Rand, n int, p float64) int {
	k := 0
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}

// poisson draws Poisson(lambda) by Knuth's method (lambda is small).
func poisson(rng *rand.Rand, lambda float64) float64 {
	l, k, p := math.Exp(-lambda), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// judgeConfig is the judge as a user would configure it: Kayenta's
// defaults (confidence 0.98, tolerance 0.25, 20 samples), bad direction
// up. The spinnaker#6278 case has 10 samples, so minSamples is 10 there.
func judgeConfig(d Data) api.JudgeProvider {
	c := analysis.JudgeConfig(api.JudgeProvider{Direction: api.DirectionIncrease})
	if d.Scenario.Kind == Spinnaker6278 {
		c.MinSamples = 10
	}
	return c
}
