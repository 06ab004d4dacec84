package analysis

import (
	"math"
	"math/big"
	"testing"
)

// The oracle values below are R's printed output for the examples in its
// own documentation (R stats package, ?binom.test and ?poisson.test):
//
//	> binom.test(c(682, 243), p = 3/4)
//	number of successes = 682, number of trials = 925, p-value = 0.3825
//	95 percent confidence interval: 0.7076683 0.7654066
//	probability of success 0.7372973
//
//	> poisson.test(c(11, 6+8+7), c(800, 1083+1050+878))
//	count1 = 11, expected count1 = 6.7174, p-value = 0.07967
//	95 percent confidence interval: 0.8584264 4.2772659
//	rate ratio 1.971488
//
// R's two-sided p-values are "minlike" ones; sluice's P is the central
// one, so the p-values are checked against exact enumeration instead.
func TestCompareRatesAgainstR(t *testing.T) {
	tests := []struct {
		name                 string
		x1, n1, x2, n2       float64
		ratio, lower, upper  float64
		pLo, pHi, pTolerance float64
	}{
		// binom.test(682 of 925, p = 3/4) is the conditional test with
		// exposures 3 and 1: p0 = 3/(3+1). Its interval is on p; mapped to
		// R = p/(1-p)·n2/n1 below.
		{name: "binom.test Mendel peas", x1: 682, n1: 3, x2: 243, n2: 1,
			ratio: 0.7372973 / (1 - 0.7372973) / 3, lower: 0.7076683 / (1 - 0.7076683) / 3, upper: 0.7654066 / (1 - 0.7654066) / 3},
		{name: "poisson.test eba1977 Fredericia", x1: 11, n1: 800, x2: 6 + 8 + 7, n2: 1083 + 1050 + 878,
			ratio: 1.971488, lower: 0.8584264, upper: 4.2772659},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := CompareRates(tt.x1, tt.n1, tt.x2, tt.n2, 0.95)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"ratio", r.Ratio, tt.ratio}, {"lower", r.Lower, tt.lower}, {"upper", r.Upper, tt.upper}} {
				// R prints 7 significant digits.
				if math.Abs(c.got-c.want) > 2e-6*c.want {
					t.Errorf("%s = %.8g, R says %.8g", c.what, c.got, c.want)
				}
			}
		})
	}
}

// exactTails enumerates Binomial(n, p) with rational arithmetic: P(X ≥ k)
// and P(X ≤ k), independent of the incomplete beta function.
func exactTails(k, n int64, p *big.Rat) (upper, lower float64) {
	q := new(big.Rat).Sub(big.NewRat(1, 1), p)
	up, lo := new(big.Rat), new(big.Rat)
	for i := int64(0); i <= n; i++ {
		term := new(big.Rat).SetInt(new(big.Int).Binomial(n, i))
		term.Mul(term, new(big.Rat).SetFrac(new(big.Int).Exp(p.Num(), big.NewInt(i), nil), new(big.Int).Exp(p.Denom(), big.NewInt(i), nil)))
		term.Mul(term, new(big.Rat).SetFrac(new(big.Int).Exp(q.Num(), big.NewInt(n-i), nil), new(big.Int).Exp(q.Denom(), big.NewInt(n-i), nil)))
		if i >= k {
			up.Add(up, term)
		}
		if i <= k {
			lo.Add(lo, term)
		}
	}
	u, _ := up.Float64()
	l, _ := lo.Float64()
	return u, l
}

func TestCompareRatesPValuesAgainstEnumeration(t *testing.T) {
	tests := []struct {
		name           string
		x1, n1, x2, n2 int64
	}{
		{name: "poisson.test eba1977", x1: 11, n1: 800, x2: 21, n2: 3011},
		{name: "issue example 48 of 1500 vs 15 of 1500", x1: 48, n1: 1500, x2: 15, n2: 1500},
		{name: "healthy 14 vs 16", x1: 14, n1: 1500, x2: 16, n2: 1500},
		{name: "canary quieter, 10% share", x1: 3, n1: 150, x2: 130, n2: 13500},
		{name: "no canary events", x1: 0, n1: 1500, x2: 9, n2: 1500},
		{name: "no baseline events", x1: 7, n1: 1500, x2: 0, n2: 1500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := CompareRates(float64(tt.x1), float64(tt.n1), float64(tt.x2), float64(tt.n2), 0.98)
			up, lo := exactTails(tt.x1, tt.x1+tt.x2, big.NewRat(tt.n1, tt.n1+tt.n2))
			if math.Abs(r.PHigher-up) > 1e-9*math.Max(up, 1e-300) && math.Abs(r.PHigher-up) > 1e-14 {
				t.Errorf("PHigher = %.10g, enumeration %.10g", r.PHigher, up)
			}
			if math.Abs(r.PLower-lo) > 1e-9*math.Max(lo, 1e-300) && math.Abs(r.PLower-lo) > 1e-14 {
				t.Errorf("PLower = %.10g, enumeration %.10g", r.PLower, lo)
			}
			// The interval excludes 1 exactly when the central p-value is
			// below 1 - confidence: verdicts never disagree with p.
			if excludes := r.Lower > 1 || r.Upper < 1; excludes != (r.P < 0.02) {
				t.Errorf("interval [%g, %g] and p=%g disagree", r.Lower, r.Upper, r.P)
			}
		})
	}
}

func TestCompareRatesEdges(t *testing.T) {
	tests := []struct {
		name           string
		x1, n1, x2, n2 float64
		wantRatio      float64 // NaN: none
		wantUpperInf   bool
	}{
		{name: "no events at all", x1: 0, n1: 100, x2: 0, n2: 100, wantRatio: math.NaN(), wantUpperInf: true},
		{name: "no canary traffic", x1: 0, n1: 0, x2: 3, n2: 100, wantRatio: math.NaN(), wantUpperInf: true},
		{name: "no baseline errors", x1: 4, n1: 100, x2: 0, n2: 100, wantRatio: math.Inf(1), wantUpperInf: true},
		{name: "fractional counts round", x1: 2.4, n1: 100, x2: 0.6, n2: 100, wantRatio: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := CompareRates(tt.x1, tt.n1, tt.x2, tt.n2, 0.98)
			if math.IsNaN(tt.wantRatio) != math.IsNaN(r.Ratio) || (!math.IsNaN(tt.wantRatio) && r.Ratio != tt.wantRatio) {
				t.Errorf("ratio = %g, want %g", r.Ratio, tt.wantRatio)
			}
			if math.IsInf(r.Upper, 1) != tt.wantUpperInf {
				t.Errorf("upper = %g, want +Inf: %v", r.Upper, tt.wantUpperInf)
			}
		})
	}
}
