package analysis

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func noisy(rng *rand.Rand, n int, mean, sd float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean + rng.NormFloat64()*sd
	}
	return out
}

func TestJudge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	baseline := noisy(rng, 30, 0.010, 0.002)
	same := noisy(rng, 30, 0.010, 0.002)
	higher := noisy(rng, 30, 0.030, 0.002)
	lower := noisy(rng, 30, 0.002, 0.001)
	slightlyHigher := noisy(rng, 30, 0.0115, 0.0005) // +15%, tight: detected
	noisyHigher := noisy(rng, 30, 0.011, 0.004)      // +10% in noise twice as wide: not proven
	tests := []struct {
		name      string
		canary    []float64
		baseline  []float64
		direction api.Direction
		want      Class
		wantText  string
	}{
		{name: "same distribution passes", canary: same, baseline: baseline, want: ClassPass},
		{name: "identical samples pass", canary: baseline, baseline: baseline, want: ClassPass},
		{name: "increase is High", canary: higher, baseline: baseline, direction: api.DirectionIncrease, want: ClassHigh, wantText: "High: canary median 0.029"},
		{name: "increase with either is High", canary: higher, baseline: baseline, direction: api.DirectionEither, want: ClassHigh},
		{name: "increase is fine when only decrease is bad", canary: higher, baseline: baseline, direction: api.DirectionDecrease, want: ClassPass},
		{name: "decrease is Low", canary: lower, baseline: baseline, direction: api.DirectionDecrease, want: ClassLow},
		{name: "decrease is fine when only increase is bad", canary: lower, baseline: baseline, direction: api.DirectionIncrease, want: ClassPass},
		{name: "small clear shift is High", canary: slightlyHigher, baseline: baseline, direction: api.DirectionIncrease, want: ClassHigh},
		{name: "small noisy shift passes", canary: noisyHigher, baseline: baseline, direction: api.DirectionIncrease, want: ClassPass},
		{name: "too few canary samples", canary: higher[:19], baseline: baseline, want: ClassNoData, wantText: "not enough data: canary 19, baseline 30 samples (minSamples 20)"},
		{name: "NaN samples are dropped", canary: append(append([]float64(nil), higher[:15]...), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()), baseline: baseline, want: ClassNoData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Judge(tt.canary, tt.baseline, api.JudgeProvider{Direction: tt.direction})
			if j.Class != tt.want {
				t.Fatalf("class = %s, want %s (%s)", j.Class, tt.want, j)
			}
			if tt.wantText != "" && !strings.Contains(j.String(), tt.wantText) {
				t.Fatalf("text %q does not contain %q", j, tt.wantText)
			}
		})
	}
}

func TestJudgeExplainsInUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 6))
	j := Judge(noisy(rng, 30, 0.15, 0.002), noisy(rng, 30, 0.10, 0.002), api.JudgeProvider{Unit: "s"})
	for _, want := range []string{"High: canary median 0.1499 s vs baseline 0.09993 s, shift 0.04958 s", "allowed ±0.0124 s, p=", ": failed"} {
		if !strings.Contains(j.String(), want) {
			t.Errorf("explanation %q does not contain %q", j, want)
		}
	}
}

func TestJudgeDefaults(t *testing.T) {
	c := JudgeConfig(api.JudgeProvider{})
	if c.Confidence != 0.98 || c.Tolerance != 0.25 || c.MinSamples != 20 || c.Direction != api.DirectionIncrease {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestRunScore(t *testing.T) {
	pass := MetricScore{Class: ClassPass}
	high := MetricScore{Class: ClassHigh}
	noData := MetricScore{Class: ClassNoData}
	critical := MetricScore{Class: ClassHigh, Critical: true}
	criticalPass := MetricScore{Class: ClassPass, Critical: true}
	many := func(n int, m MetricScore) []MetricScore {
		out := make([]MetricScore, n)
		for i := range out {
			out[i] = m
		}
		return out
	}
	tests := []struct {
		name  string
		ms    []MetricScore
		score float64
		phase Phase
	}{
		{name: "all pass", ms: []MetricScore{pass, criticalPass}, score: 100, phase: PhaseSuccessful},
		{name: "19 of 20 pass", ms: append(many(19, pass), high), score: 95, phase: PhaseSuccessful},
		{name: "marginal", ms: append(many(4, pass), high), score: 80, phase: PhaseInconclusive},
		{name: "no data does not pass", ms: []MetricScore{pass, noData}, score: 50, phase: PhaseFailed},
		{name: "critical failure is 0", ms: append(many(30, pass), critical), score: 0, phase: PhaseFailed},
		{name: "nothing judged", ms: nil, score: 0, phase: PhaseFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := RunScore(tt.ms)
			if s != tt.score || ScorePhase(s) != tt.phase {
				t.Fatalf("score %v phase %s, want %v %s", s, ScorePhase(s), tt.score, tt.phase)
			}
		})
	}
}
