package scheduler

import (
	"math"
	"time"
)

// heatClock keeps node heat with exponential decay without touching every
// node as time passes. Each node stores heat × e^{(now-origin)/τ}; the
// common factor (scale) cancels whenever nodes are compared or normalised,
// so scoring needs one multiplication per node and no exp. When the factor
// grows large the stored values are rebased once (Graph.Advance).
type heatClock struct {
	tau          float64 // seconds; half-life / ln 2
	started      bool
	origin       time.Time
	now          time.Time
	scale        float64
	rebaseFactor float64
}

// rebaseAt bounds the exponent before stored heats are rebased (e^30≈1e13,
// far from float64 limits but keeps precision).
const rebaseAt = 30

func (h *heatClock) init(halfLife time.Duration) {
	h.tau = halfLife.Seconds() / math.Ln2
	h.scale = 1
}

// advance moves the clock to now and reports whether stored heats must be
// multiplied by rebaseFactor.
func (h *heatClock) advance(now time.Time) bool {
	if !h.started {
		h.started, h.origin, h.now, h.scale = true, now, now, 1
		return false
	}
	if !now.After(h.now) {
		return false
	}
	h.now = now
	x := now.Sub(h.origin).Seconds() / h.tau
	if x > rebaseAt {
		h.rebaseFactor = math.Exp(-x)
		h.origin, h.scale = now, 1
		return true
	}
	h.scale = math.Exp(x)
	return false
}

// scaleHeat converts a heat figure at the current time to stored form.
func (h *heatClock) scaleHeat(v float64) float64 { return v * h.scale }

// podHeat is how much heat placing req on a node of capacity c adds: the
// share of the node's CPU it takes (memory when CPU is not given).
func podHeat(req, c Resources) float64 {
	switch {
	case c.MilliCPU > 0 && req.MilliCPU > 0:
		return float64(req.MilliCPU) / float64(c.MilliCPU)
	case c.Memory > 0 && req.Memory > 0:
		return float64(req.Memory) / float64(c.Memory)
	}
	return 0
}
