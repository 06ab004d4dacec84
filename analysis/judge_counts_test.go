package analysis

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func TestJudgeCounts(t *testing.T) {
	tests := []struct {
		name           string
		x1, n1, x2, n2 float64
		direction      api.Direction
		want           Class
		wantText       string
	}{
		{name: "issue example: 3.2× worse fails", x1: 48, n1: 1500, x2: 15, n2: 1500, want: ClassHigh,
			wantText: "canary 3.2 % errors (48 of 1,500) vs baseline 1 % (15 of 1,500): 3.2× worse, 98 % interval [1.6×, 6.97×], allowed 1.25×, failed"},
		{name: "1.1× worse at high traffic passes: proven, but within tolerance", x1: 11000, n1: 1e6, x2: 10000, n2: 1e6, want: ClassPass,
			wantText: "1.1× worse, 98 % interval [1.07×, 1.14×], allowed 1.25×, passed"},
		{name: "3× worse at 5 req/s fails", x1: 45, n1: 1500, x2: 15, n2: 1500, want: ClassHigh},
		{name: "healthy passes", x1: 17, n1: 1500, x2: 14, n2: 1500, want: ClassPass},
		{name: "no errors anywhere passes", x1: 0, n1: 1500, x2: 0, n2: 1500, want: ClassPass, wantText: "no errors on either side"},
		{name: "errors only on the canary fail", x1: 12, n1: 1500, x2: 0, n2: 1500, want: ClassHigh, wantText: "∞ worse"},
		{name: "canary at its 10% share", x1: 20, n1: 150, x2: 135, n2: 13500, want: ClassHigh},
		{name: "no canary traffic is NoData", x1: 0, n1: 0, x2: 15, n2: 1500, want: ClassNoData, wantText: "no traffic: canary 0, baseline 1,500 requests"},
		{name: "better is fine when increase is bad", x1: 2, n1: 1500, x2: 30, n2: 1500, want: ClassPass, wantText: "15× better"},
		{name: "fewer successes is Low when decrease is bad", x1: 100, n1: 1500, x2: 400, n2: 1500, direction: api.DirectionDecrease, want: ClassLow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := JudgeCounts(tt.x1, tt.n1, tt.x2, tt.n2, api.JudgeProvider{Direction: tt.direction})
			if j.Class != tt.want {
				t.Fatalf("class %s, want %s: %s", j.Class, tt.want, j)
			}
			if !strings.Contains(j.String(), tt.wantText) {
				t.Fatalf("explanation %q does not contain %q", j, tt.wantText)
			}
		})
	}
}

// poisson draws Poisson(lambda) by Knuth's method (lambda is small here).
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

// simulateSteps draws steps of Poisson errors with a shared baseline
// rate that moves from step to step, the canary's rate ratio times it.
func simulateSteps(rng *rand.Rand, steps int, requests, rate, ratio float64) []CountStep {
	out := make([]CountStep, steps)
	for i := range out {
		r := rate * math.Exp(0.3*rng.NormFloat64())
		out[i] = CountStep{poisson(rng, requests*r*ratio), requests, poisson(rng, requests*r), requests}
	}
	return out
}

// TestJudgeCountsSequentialLooksDoNotRaiseFalseAborts: healthy canaries
// judged after each of 120 steps. The mixture test keeps false aborts
// under its 1 % bound; the fixed test applied after each step (what
// "measure every interval" does with a fixed-horizon test) does not,
// which is why the sequential mode exists.
func TestJudgeCountsSequentialLooksDoNotRaiseFalseAborts(t *testing.T) {
	const canaries, steps = 600, 120
	rng := rand.New(rand.NewPCG(15, 1))
	cfg := api.JudgeProvider{Tolerance: 0.01} // a small margin, so the test itself is exercised
	var sequential, peeking int
	for range canaries {
		s := simulateSteps(rng, steps, 50, 0.02, 1)
		if JudgeCountsSequential(s, steps, cfg).Class == ClassHigh {
			sequential++
		}
		var sum CountStep
		for _, st := range s {
			sum = CountStep{sum.CanaryEvents + st.CanaryEvents, sum.CanaryTotal + st.CanaryTotal, sum.BaselineEvents + st.BaselineEvents, sum.BaselineTotal + st.BaselineTotal}
			if JudgeCounts(sum.CanaryEvents, sum.CanaryTotal, sum.BaselineEvents, sum.BaselineTotal, cfg).Class == ClassHigh {
				peeking++
				break
			}
		}
	}
	t.Logf("false aborts of %d healthy canaries: sequential %d, fixed test peeked at every step %d", canaries, sequential, peeking)
	if sequential > canaries/100 {
		t.Fatalf("sequential mode aborted %d of %d healthy canaries, bound 1 %%", sequential, canaries)
	}
	if peeking <= sequential {
		t.Fatalf("peeking with the fixed test (%d) should abort more than the sequential test (%d)", peeking, sequential)
	}
}

func TestJudgeCountsSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 2))
	tests := []struct {
		name      string
		steps     []CountStep
		want      Class
		maxSteps  int
		wantInMsg string
	}{
		{name: "3× regression at 50 req/s stops early", steps: simulateSteps(rng, 30, 500, 0.01, 3), want: ClassHigh, maxSteps: 10, wantInMsg: "sequential: evidence"},
		{name: "healthy at high traffic passes early", steps: simulateSteps(rng, 30, 50000, 0.01, 1), want: ClassPass, maxSteps: 15},
		{name: "healthy at 1 req/s stays open", steps: simulateSteps(rng, 30, 10, 0.01, 1), want: ClassOpen, maxSteps: 30, wantInMsg: "undecided so far"},
		{name: "no steps yet is open", steps: nil, want: ClassOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := JudgeCountsSequential(tt.steps, 30, api.JudgeProvider{})
			if j.Class != tt.want || j.Steps > tt.maxSteps {
				t.Fatalf("class %s after %d steps, want %s within %d: %s", j.Class, j.Steps, tt.want, tt.maxSteps, j)
			}
			if !strings.Contains(j.String(), tt.wantInMsg) {
				t.Fatalf("explanation %q does not contain %q", j, tt.wantInMsg)
			}
		})
	}
}
