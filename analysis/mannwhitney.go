package analysis

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// MannWhitney is the outcome of a two-sided Mann-Whitney U test of
// canary (x) against baseline (y), with the Hodges–Lehmann estimate of the
// shift x - y and its confidence interval.
type MannWhitney struct {
	// U is the statistic of x: the number of pairs with x_i > y_j, ties
	// counting one half.
	U float64
	// Z is the standardized U, with tie and continuity corrections.
	Z float64
	// P is the two-sided p-value by the normal approximation.
	P float64
	// Shift is the Hodges–Lehmann estimate: the median of all x_i - y_j.
	Shift float64
	// Lower and Upper bound the shift at the requested confidence.
	Lower, Upper float64
}

var stdNormal = distuv.Normal{Mu: 0, Sigma: 1}

// MannWhitneyU tests whether x and y come from the same distribution. It
// uses the normal approximation with the tie correction of the variance
// and a continuity correction (as R's wilcox.test with exact=FALSE,
// correct=TRUE), which is accurate for the 20+ samples the judge demands.
// The confidence interval of the shift takes order statistics of the
// pairwise differences (Hollander & Wolfe). Empty x or y gives P = 1.
func MannWhitneyU(x, y []float64, confidence float64) MannWhitney {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return MannWhitney{P: 1}
	}
	rx, tieSum := ranks(x, y)
	var r1 float64
	for _, r := range rx {
		r1 += r
	}
	mf, nf := float64(m), float64(n)
	u := r1 - mf*(mf+1)/2
	mu := mf * nf / 2
	N := mf + nf
	variance := mf * nf / 12 * ((N + 1) - tieSum/(N*(N-1)))
	res := MannWhitney{U: u, P: 1}
	sigma := math.Sqrt(math.Max(variance, 0))
	if sigma > 0 {
		d := u - mu
		switch {
		case d > 0.5:
			d -= 0.5
		case d < -0.5:
			d += 0.5
		default:
			d = 0
		}
		res.Z = d / sigma
		res.P = math.Min(1, 2*stdNormal.CDF(-math.Abs(res.Z)))
	}
	res.Shift, res.Lower, res.Upper = hodgesLehmann(x, y, sigma, confidence)
	return res
}

// ranks gives the mid-ranks of x within the pooled sample x ∪ y, and
// Σ(t³ - t) over tie groups for the variance correction.
func ranks(x, y []float64) ([]float64, float64) {
	type obs struct {
		v    float64
		from int // index into x, or -1 for y
	}
	all := make([]obs, 0, len(x)+len(y))
	for i, v := range x {
		all = append(all, obs{v, i})
	}
	for _, v := range y {
		all = append(all, obs{v, -1})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	rx := make([]float64, len(x))
	var tieSum float64
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		mid := float64(i+j+1) / 2 // ranks i+1..j, averaged
		if t := float64(j - i); t > 1 {
			tieSum += t*t*t - t
		}
		for k := i; k < j; k++ {
			if all[k].from >= 0 {
				rx[all[k].from] = mid
			}
		}
		i = j
	}
	return rx, tieSum
}

// hodgesLehmann returns the median of the pairwise differences and the
// confidence bounds at order statistics k and mn-1-k, where
// k = floor(mn/2 - z·σ_U).
func hodgesLehmann(x, y []float64, sigma, confidence float64) (shift, lower, upper float64) {
	d := make([]float64, 0, len(x)*len(y))
	for _, a := range x {
		for _, b := range y {
			d = append(d, a-b)
		}
	}
	sort.Float64s(d)
	mn := len(d)
	if mn%2 == 1 {
		shift = d[mn/2]
	} else {
		shift = (d[mn/2-1] + d[mn/2]) / 2
	}
	z := stdNormal.Quantile(1 - (1-confidence)/2)
	k := int(math.Floor(float64(mn)/2 - z*sigma))
	if k < 0 {
		k = 0
	}
	if k > mn-1-k {
		k = (mn - 1) / 2
	}
	return shift, d[k], d[mn-1-k]
}
