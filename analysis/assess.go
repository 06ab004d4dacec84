package analysis

import (
	"fmt"
	"strings"
)

// Assess decides a metric's phase from its tally and its retained
// measurements (oldest first), following Argo's assessMetricStatus: the
// failure, inconclusive and consecutive-error limits are checked first,
// then consecutiveSuccessLimit, then count. terminating means the run is
// ending (another metric decided it), so an unbounded metric stops as
// Successful. The message is one line for status and alerts.
func Assess(m *Metric, t Tally, ms []Measurement, terminating bool) (Phase, string) {
	if t.Count == 0 && t.Error == 0 {
		if terminating {
			return PhaseSuccessful, "run ended before the first measurement"
		}
		return PhasePending, ""
	}
	if p, msg := assessLimits(m, t, ms); p != "" {
		return p, msg
	}
	if m.ConsecutiveSuccessLimit > 0 && t.ConsecutiveSuccess >= m.ConsecutiveSuccessLimit {
		return PhaseSuccessful, fmt.Sprintf("%d consecutive successes (consecutiveSuccessLimit %d)", t.ConsecutiveSuccess, m.ConsecutiveSuccessLimit)
	}
	if m.Count > 0 && t.Count >= m.Count {
		if m.ConsecutiveSuccessLimit > 0 {
			// Argo: with a failureLimit in force as well, missing the
			// success streak is Inconclusive; alone it is a failure.
			msg := fmt.Sprintf("%d consecutive successes after %d measurements (consecutiveSuccessLimit %d)", t.ConsecutiveSuccess, t.Count, m.ConsecutiveSuccessLimit)
			if m.FailureLimit >= 0 {
				return PhaseInconclusive, msg
			}
			return PhaseFailed, msg
		}
		return PhaseSuccessful, successMessage(t, ms)
	}
	if terminating {
		return PhaseSuccessful, successMessage(t, ms)
	}
	return PhaseRunning, ""
}

// assessLimits returns the phase the limits force, or "". Later checks
// win, as in Argo: Error over Inconclusive over Failed.
func assessLimits(m *Metric, t Tally, ms []Measurement) (Phase, string) {
	var phase Phase
	var msg string
	if m.critical && t.Failed > 0 {
		phase, msg = PhaseFailed, lastMessage(ms, PhaseFailed)+" (critical)"
	} else if m.FailureLimit >= 0 && t.Failed > m.FailureLimit {
		phase, msg = PhaseFailed, withCount(t.Failed, "failed", lastMessage(ms, PhaseFailed))+fmt.Sprintf(" (failureLimit %d)", m.FailureLimit)
	}
	if t.Inconclusive > m.InconclusiveLimit {
		phase, msg = PhaseInconclusive, withCount(t.Inconclusive, "inconclusive", lastMessage(ms, PhaseInconclusive))+fmt.Sprintf(" (inconclusiveLimit %d)", m.InconclusiveLimit)
	}
	if t.ConsecutiveError > m.ConsecutiveErrorLimit {
		phase, msg = PhaseError, fmt.Sprintf("%s, last: %s (consecutiveErrorLimit %d)", plural(t.ConsecutiveError, "consecutive error"), lastMessage(ms, PhaseError), m.ConsecutiveErrorLimit)
	}
	return phase, msg
}

func withCount(n int, what, last string) string {
	if n == 1 {
		return last
	}
	return fmt.Sprintf("%d measurements %s, last %s", n, what, last)
}

func lastMessage(ms []Measurement, p Phase) string {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Phase == p {
			if ms[i].Message != "" {
				return ms[i].Message
			}
			return ms[i].Value
		}
	}
	return strings.ToLower(string(p))
}

func successMessage(t Tally, ms []Measurement) string {
	last := ""
	if len(ms) > 0 {
		last = ", last " + ms[len(ms)-1].Value
	}
	return fmt.Sprintf("%d of %d measurements successful%s", t.Successful, t.Count, last)
}

// RunPhase combines a run's metric statuses into its phase and one-line
// reason. Dry-run metrics never decide the run. A metric that ends Failed,
// Error or Inconclusive ends the run (Argo terminates the other metrics);
// the worst such metric names the reason.
func RunPhase(metrics []MetricStatus) (Phase, string) {
	phase := PhaseSuccessful
	reason := ""
	allDone := true
	var dry []string
	for _, s := range metrics {
		if !s.Phase.Completed() {
			allDone = false // dry-run metrics too, as in Argo
		}
		if s.DryRun {
			if s.Phase != PhaseSuccessful && s.Phase.Completed() {
				dry = append(dry, fmt.Sprintf("%s %s", s.Name, s.Phase))
			}
			continue
		}
		if s.Phase.Completed() && s.Phase != PhaseSuccessful && (reason == "" || worse(phase, s.Phase)) {
			phase, reason = s.Phase, s.Name+": "+s.Message
		}
	}
	if reason != "" {
		return phase, reason
	}
	if !allDone {
		return PhaseRunning, ""
	}
	reason = "all metrics successful"
	if len(dry) > 0 {
		reason += " (dry-run: " + strings.Join(dry, ", ") + ")"
	}
	return PhaseSuccessful, reason
}

// terminating reports whether a non-dry-run metric has ended the run.
func terminating(metrics []MetricStatus) bool {
	for _, s := range metrics {
		if !s.DryRun && (s.Phase == PhaseFailed || s.Phase == PhaseError || s.Phase == PhaseInconclusive) {
			return true
		}
	}
	return false
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
