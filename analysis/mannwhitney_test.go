package analysis

import (
	"math"
	"math/rand/v2"
	"testing"
)

// exactU enumerates every split of the pooled sample into groups of
// len(x) and len(y) (the permutation distribution of U under H0) and
// returns the exact one-sided P(U >= u) and two-sided
// P(|U - mn/2| >= |u - mn/2|). It shares no code with MannWhitneyU: U is
// counted pairwise, with ties as one half, not from ranks.
func exactU(x, y []float64) (u, greater, twoSided float64) {
	pairU := func(a, b []float64) float64 {
		var s float64
		for _, p := range a {
			for _, q := range b {
				switch {
				case p > q:
					s++
				case p == q:
					s += 0.5
				}
			}
		}
		return s
	}
	u = pairU(x, y)
	pool := append(append([]float64(nil), x...), y...)
	m, n := len(x), len(pool)
	mu := float64(m*len(y)) / 2
	var total, ge, far float64
	pick := make([]bool, n)
	var rec func(i, left int)
	rec = func(i, left int) {
		if left == 0 {
			var a, b []float64
			for k, v := range pool {
				if pick[k] {
					a = append(a, v)
				} else {
					b = append(b, v)
				}
			}
			s := pairU(a, b)
			total++
			if s >= u-1e-9 {
				ge++
			}
			if math.Abs(s-mu) >= math.Abs(u-mu)-1e-9 {
				far++
			}
			return
		}
		if n-i < left {
			return
		}
		pick[i] = true
		rec(i+1, left-1)
		pick[i] = false
		rec(i+1, left)
	}
	rec(0, m)
	return u, ge / total, far / total
}

func TestMannWhitneyPublishedExample(t *testing.T) {
	// R's ?wilcox.test example (Hollander & Wolfe, p. 69): permeability
	// constants; wilcox.test(x, y, alternative = "g") gives W = 35,
	// p-value = 0.1272 (exact).
	x := []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46}
	y := []float64{1.15, 0.88, 0.90, 0.74, 1.21}
	u, greater, two := exactU(x, y)
	if u != 35 || math.Abs(greater-0.1272) > 5e-5 {
		t.Fatalf("exact enumeration: U=%v p=%.5f; R says W=35 p=0.1272", u, greater)
	}
	got := MannWhitneyU(x, y, 0.95)
	if got.U != 35 {
		t.Fatalf("U = %v, want 35", got.U)
	}
	// Normal approximation with continuity correction:
	// z = (35 - 25 - 0.5) / sqrt(10·5·16/12) = 1.16346, p = 0.24465.
	if math.Abs(got.Z-1.16346) > 1e-4 || math.Abs(got.P-0.24465) > 1e-4 {
		t.Fatalf("z=%.5f p=%.5f, want 1.16346 0.24465", got.Z, got.P)
	}
	if math.Abs(got.P-two) > 0.02 {
		t.Fatalf("approximate p %.4f is far from exact %.4f", got.P, two)
	}
}

func TestMannWhitneyAgainstExact(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
	}{
		{name: "no ties, clear shift", x: []float64{5.1, 6.2, 7.3, 5.9, 6.8, 7.7, 6.1, 5.5}, y: []float64{4.2, 5.0, 3.9, 4.8, 5.3, 4.4, 3.1, 4.9}},
		{name: "no ties, overlap", x: []float64{1.2, 3.4, 2.2, 5.1, 0.7, 2.9, 4.4, 3.8}, y: []float64{2.1, 1.9, 3.3, 0.4, 2.6, 1.1, 4.0, 1.4}},
		{name: "heavy ties", x: []float64{1, 2, 2, 3, 3, 3, 4, 5}, y: []float64{1, 1, 2, 2, 2, 3, 3, 4}},
		{name: "ties, shifted", x: []float64{3, 3, 4, 4, 5, 5, 5, 6}, y: []float64{1, 2, 2, 3, 3, 3, 4, 4}},
		{name: "unequal sizes with ties", x: []float64{10, 12, 12, 15, 18, 18}, y: []float64{9, 10, 10, 11, 12, 13, 14, 14, 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, _, exact := exactU(tt.x, tt.y)
			got := MannWhitneyU(tt.x, tt.y, 0.95)
			if got.U != u {
				t.Fatalf("U = %v, pairwise count %v", got.U, u)
			}
			t.Logf("p approx %.4f exact %.4f", got.P, exact)
			if math.Abs(got.P-exact) > 0.02 {
				t.Fatalf("p = %.4f, exact permutation p = %.4f", got.P, exact)
			}
		})
	}
}

func TestMannWhitneyDegenerate(t *testing.T) {
	tests := []struct {
		name      string
		x, y      []float64
		wantP     float64
		wantShift float64
	}{
		{name: "empty", x: nil, y: []float64{1}, wantP: 1},
		{name: "all equal", x: []float64{2, 2, 2}, y: []float64{2, 2}, wantP: 1, wantShift: 0},
		{name: "exact shift", x: []float64{6, 7, 8, 9, 10}, y: []float64{1, 2, 3, 4, 5}, wantShift: 5, wantP: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MannWhitneyU(tt.x, tt.y, 0.95)
			if tt.wantP >= 0 && got.P != tt.wantP {
				t.Errorf("p = %v, want %v", got.P, tt.wantP)
			}
			if got.Shift != tt.wantShift {
				t.Errorf("shift = %v, want %v", got.Shift, tt.wantShift)
			}
			if got.Lower > got.Shift || got.Upper < got.Shift {
				t.Errorf("CI [%v, %v] excludes the estimate %v", got.Lower, got.Upper, got.Shift)
			}
		})
	}
}

// TestHodgesLehmannCoverage checks the confidence interval does what it
// says: over many samples with a known shift, about 98% of the 98%
// intervals contain it.
func TestHodgesLehmannCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const trials, n, shift = 1000, 30, 0.3
	covered := 0
	x, y := make([]float64, n), make([]float64, n)
	for range trials {
		for i := range n {
			x[i] = rng.NormFloat64() + shift
			y[i] = rng.NormFloat64()
		}
		r := MannWhitneyU(x, y, 0.98)
		if r.Lower <= shift && shift <= r.Upper {
			covered++
		}
	}
	rate := float64(covered) / trials
	// Binomial sd at 0.98 over 1000 trials is 0.0044.
	if rate < 0.965 || rate > 0.995 {
		t.Fatalf("coverage %.3f, want about 0.98", rate)
	}
}
