package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/api"
)

// Config describes one simulation.
type Config struct {
	Canaries int           // per scenario
	RPS      int           // requests per second, canary and baseline each
	Window   time.Duration // analysis window (lookback)
	Step     time.Duration // one judge sample per step
	Seed     uint64
	Workers  int
	// Thresholds are the plain threshold conditions compared with the judge.
	Thresholds []Threshold
}

// Threshold is a static condition of the kind written in an Argo
// template, set per service relative to its typical values and evaluated
// once over the whole window (its most favourable setting).
type Threshold struct {
	Name string
	// ErrorPoints: abort when the window's error rate exceeds the
	// service's typical rate by more than this many points.
	ErrorPoints float64
	// LatencyFactor: abort when the window's p99 exceeds the service's
	// typical p99 times this.
	LatencyFactor float64
}

// Scenario is a kind of canary.
type Scenario int

// Scenarios.
const (
	Healthy Scenario = iota
	ErrorRegression
	LatencyRegression
)

func (s Scenario) String() string {
	return [...]string{"healthy", "+2 pt error rate", "+20% p99 latency"}[s]
}

// Outcome counts aborts per scenario for one method.
type Outcome struct {
	Method string
	Aborts [3]int
}

// Result is the table of one simulation.
type Result struct {
	Config   Config
	Outcomes []Outcome // judge first, then the thresholds
	Elapsed  time.Duration
}

// service is what one simulated canary runs against. Its typical values
// differ between services; on the day of the canary the environment
// (load, downstreams) moves them, the same for canary and baseline.
type service struct {
	typicalErr, typicalP99 float64 // what a human wrote thresholds from
	envErr, envP99         float64 // during this canary
}

// Judge configs for the two judged metrics: Kayenta defaults, the bad
// direction is up, both critical.
func judgeConfig(c Config) api.JudgeProvider {
	return api.JudgeProvider{Direction: api.DirectionIncrease, Critical: true, Lookback: c.Window, Step: c.Step}
}

// Run simulates c.Canaries canaries of every scenario.
func Run(c Config) Result {
	start := time.Now()
	type job struct {
		idx int
		sc  Scenario
	}
	jobs := make(chan job)
	res := Result{Config: c, Outcomes: make([]Outcome, 1+len(c.Thresholds))}
	res.Outcomes[0].Method = "judge (Mann-Whitney, confidence 0.98, tolerance 0.25)"
	for i, th := range c.Thresholds {
		res.Outcomes[1+i].Method = th.Name
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(c.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				// One stream per canary: results do not depend on scheduling.
				rng := rand.New(rand.NewPCG(c.Seed, uint64(j.sc)<<32|uint64(j.idx)))
				judged, thresholds := simulate(rng, c, j.sc)
				mu.Lock()
				if judged {
					res.Outcomes[0].Aborts[j.sc]++
				}
				for i, a := range thresholds {
					if a {
						res.Outcomes[1+i].Aborts[j.sc]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	for sc := Healthy; sc <= LatencyRegression; sc++ {
		for i := range c.Canaries {
			jobs <- job{i, sc}
		}
	}
	close(jobs)
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// simulate runs one canary: it reports whether the judge aborts and, per
// threshold, whether the threshold aborts.
func simulate(rng *rand.Rand, c Config, sc Scenario) (bool, []bool) {
	s := service{
		typicalErr: logUniform(rng, 0.002, 0.02),
		typicalP99: logUniform(rng, 0.05, 0.5),
	}
	s.envErr = s.typicalErr * math.Exp(rng.NormFloat64()*0.3)
	s.envP99 = s.typicalP99 * math.Exp(rng.NormFloat64()*0.1)

	steps := int(c.Window / c.Step)
	perStep := c.RPS * int(c.Step/time.Second)
	canaryErr, baseErr := make([]float64, steps), make([]float64, steps)
	canaryP99, baseP99 := make([]float64, steps), make([]float64, steps)
	var canaryErrors int
	canaryLat := make([]float64, 0, steps*perStep)
	lat := make([]float64, perStep)
	for i := range steps {
		// Load moves from step to step, for both sides alike.
		e := s.envErr * math.Exp(rng.NormFloat64()*0.1)
		p := s.envP99 * math.Exp(rng.NormFloat64()*0.05)
		ce, cp := e, p
		switch sc {
		case ErrorRegression:
			ce = e + 0.02
		case LatencyRegression:
			cp = p * 1.2
		}
		be := binomial(rng, perStep, e)
		cerr := binomial(rng, perStep, ce)
		canaryErrors += cerr
		baseErr[i] = float64(be) / float64(perStep)
		canaryErr[i] = float64(cerr) / float64(perStep)
		baseP99[i] = p99(rng, lat, p)
		canaryP99[i] = p99(rng, lat, cp)
		canaryLat = append(canaryLat, lat...)
	}
	cfg := judgeConfig(c)
	judged := analysis.RunScore([]analysis.MetricScore{
		{Class: analysis.Judge(canaryErr, baseErr, cfg).Class, Critical: true},
		{Class: analysis.Judge(canaryP99, baseP99, cfg).Class, Critical: true},
	})
	judgeAborts := analysis.ScorePhase(judged) == analysis.PhaseFailed

	windowErr := float64(canaryErrors) / float64(steps*perStep)
	windowP99 := quantile(canaryLat, 0.99)
	out := make([]bool, len(c.Thresholds))
	for i, th := range c.Thresholds {
		out[i] = windowErr > s.typicalErr+th.ErrorPoints/100 || windowP99 > s.typicalP99*th.LatencyFactor
	}
	return judgeAborts, out
}

// p99 draws n request latencies (log-normal, sigma 0.5, scaled so the
// true p99 is target) into buf and returns their empirical p99. The last
// draw stays in buf for the window's own p99.
func p99(rng *rand.Rand, buf []float64, target float64) float64 {
	const sigma = 0.5
	mu := math.Log(target) - 2.3263478740408408*sigma
	for i := range buf {
		buf[i] = math.Exp(mu + sigma*rng.NormFloat64())
	}
	return quantile(buf, 0.99)
}

func quantile(v []float64, q float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
}

// binomial draws Binomial(n, p) by summing Bernoulli trials: n is a few
// hundred, so this is fast enough and obviously right.
func binomial(rng *rand.Rand, n int, p float64) int {
	k := 0
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}
