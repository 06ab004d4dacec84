package analysis

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// RateRatio is the outcome of the conditional binomial test of two event
// counts with their exposures (errors out of requests, for canary and
// baseline): the test behind R's poisson.test for two samples.
//
// Given both counts' sum T, the canary's count is Binomial(T, p) with
// p = R·n1 / (R·n1 + n2), R being the ratio of the two rates. So the
// test and its interval are exact for Poisson counts whatever the shared
// baseline rate is, including a rate that moves during the window as
// long as it moves for both sides alike. Errors out of requests are
// binomial rather than Poisson; the Poisson model overstates their
// variance by 1/(1-rate), so the test is slightly conservative for error
// rates of a few percent and exact in the limit of rare errors.
type RateRatio struct {
	CanaryEvents, CanaryTotal     float64
	BaselineEvents, BaselineTotal float64
	// Ratio is the estimate (x1/n1)/(x2/n2); +Inf when the baseline has
	// no events and the canary has some, NaN when neither has any.
	Ratio float64
	// Lower and Upper bound R at the requested confidence: the
	// Clopper–Pearson interval of p mapped to R, which is R's
	// poisson.test interval.
	Lower, Upper float64
	// PHigher is the one-sided p-value of "the canary's rate is higher":
	// P(X ≥ x1) under R = 1. PLower is P(X ≤ x1) under R = 1.
	PHigher, PLower float64
	// P is the two-sided p-value 2·min(PHigher, PLower), capped at 1. It
	// is the p-value whose rejection region is exactly the interval
	// excluding 1 (Lower > 1 or Upper < 1), so verdict, p-value and
	// interval always agree. (R's binom.test reports the "minlike"
	// p-value instead, which may disagree with its own interval.)
	P float64
}

// CompareRates tests canary events x1 out of exposure n1 against baseline
// events x2 out of n2. Counts are rounded to whole events (Prometheus'
// increase() extrapolates to fractions). Exposures must be positive; a
// side without exposure gives no information: Ratio NaN, interval
// [0, +Inf], P 1.
func CompareRates(x1, n1, x2, n2, confidence float64) RateRatio {
	x1, x2 = math.Round(math.Max(x1, 0)), math.Round(math.Max(x2, 0))
	r := RateRatio{
		CanaryEvents: x1, CanaryTotal: n1, BaselineEvents: x2, BaselineTotal: n2,
		Ratio: math.NaN(), Lower: 0, Upper: math.Inf(1), PHigher: 1, PLower: 1, P: 1,
	}
	t := x1 + x2
	if n1 <= 0 || n2 <= 0 || t == 0 {
		return r
	}
	r.Ratio = (x1 / n1) / (x2 / n2) // x2 == 0 gives +Inf
	p0 := n1 / (n1 + n2)            // p under R = 1
	r.PHigher = binomialUpperTail(x1, t, p0)
	r.PLower = binomialLowerTail(x1, t, p0)
	r.P = math.Min(1, 2*math.Min(r.PHigher, r.PLower))
	alpha := 1 - confidence
	pLo, pHi := clopperPearson(x1, t, alpha)
	r.Lower, r.Upper = oddsToRatio(pLo, n1, n2), oddsToRatio(pHi, n1, n2)
	return r
}

// binomialUpperTail is P(X ≥ k) for X ~ Binomial(n, p), by the
// regularized incomplete beta function I_p(k, n-k+1).
func binomialUpperTail(k, n, p float64) float64 {
	if k <= 0 {
		return 1
	}
	return mathext.RegIncBeta(k, n-k+1, p)
}

// binomialLowerTail is P(X ≤ k) = 1 - P(X ≥ k+1).
func binomialLowerTail(k, n, p float64) float64 {
	if k >= n {
		return 1
	}
	return 1 - mathext.RegIncBeta(k+1, n-k, p)
}

// clopperPearson is the exact central interval of a binomial proportion
// from k successes in n trials: Beta quantiles, as R's binom.test.
func clopperPearson(k, n, alpha float64) (lo, hi float64) {
	lo, hi = 0, 1
	if k > 0 {
		lo = mathext.InvRegIncBeta(k, n-k+1, alpha/2)
	}
	if k < n {
		hi = mathext.InvRegIncBeta(k+1, n-k, 1-alpha/2)
	}
	return lo, hi
}

// oddsToRatio maps p = R·n1/(R·n1+n2) back to R.
func oddsToRatio(p, n1, n2 float64) float64 {
	if p >= 1 {
		return math.Inf(1)
	}
	return p / (1 - p) * n2 / n1
}
