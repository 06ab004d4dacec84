package demo

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// Summary is what the demo prints at the end.
type Summary struct {
	// Phase and Message are the rollout's final status.
	Phase   string
	Message string
	// Commit is the pushed commit, Tool what pushed it ("git", "go-git").
	Commit string
	Tool   string
	// PushToCanary is the time from the push of v2 until a client first got
	// an answer from v2; zero when none ever did.
	PushToCanary time.Duration
	// PushToEnd is the time from the push until the rollout settled.
	PushToEnd time.Duration
	// Steps are the steps the rollout went through, with when each began
	// (since the push).
	Steps []StepMark
	// Runs are the analysis runs with their final verdicts.
	Runs []rollout.RunStatus
	// Alerts are what the webhook sink received.
	Alerts []Received
	// Observed is the final observed split.
	Observed probe.Observation
}

// StepMark is one milestone of the rollout: an event the daemon
// published, with its time since the push.
type StepMark struct {
	At      time.Duration
	Type    string // rollout-started, step-completed, ...
	Message string
}

// timelineEvents are the events the summary lists.
var timelineEvents = map[string]bool{
	"rollout-started": true, "step-completed": true, "rollout-paused": true, "rollout-completed": true,
	"rollout-aborted": true, "analysis-failed": true, "analysis-error": true, "strategy-invalid": true, "xds-nack": true,
}

// Recorder follows frames and remembers the rollout's milestones (from
// its events, timed by the daemon) and the latest status of every
// analysis run, for the Summary.
type Recorder struct {
	pushed   time.Time // zero before the push
	seen     uint64    // highest event Seq taken
	steps    []StepMark
	runs     []rollout.RunStatus
	last     *httpapi.RolloutStatus
	observed probe.Observation
}

// NewRecorder returns a recorder waiting for the push.
func NewRecorder() *Recorder { return &Recorder{} }

// Pushed marks the push of the canary version. Events before it belong to
// the stable version settling, not to the rollout.
func (r *Recorder) Pushed(at time.Time) { r.pushed = at }

// Observe takes one frame.
func (r *Recorder) Observe(f Frame) {
	if r.pushed.IsZero() || f.Status == nil {
		return
	}
	s := f.Status
	r.last, r.observed = s, f.Observed
	for _, e := range f.Events {
		if e.Seq <= r.seen {
			continue
		}
		r.seen = e.Seq
		if timelineEvents[e.Type] && !e.Time.Before(r.pushed) {
			r.steps = append(r.steps, StepMark{At: e.Time.Sub(r.pushed), Type: e.Type, Message: e.Message})
		}
	}
	for _, run := range s.AnalysisRuns {
		found := false
		for i := range r.runs {
			if r.runs[i].Name == run.Name {
				r.runs[i], found = run, true
			}
		}
		if !found {
			r.runs = append(r.runs, run)
		}
	}
}

// Summary returns what was recorded; the caller adds the push facts and
// the alerts.
func (r *Recorder) Summary() Summary {
	s := Summary{Steps: r.steps, Runs: r.runs, Observed: r.observed}
	if r.last != nil {
		s.Phase, s.Message = string(r.last.Phase), r.last.Message
	}
	return s
}

// WriteSummary prints the summary.
func WriteSummary(w io.Writer, s Summary) {
	fmt.Fprintln(w, "Summary")
	fmt.Fprintf(w, "  Outcome        %s: %s\n", s.Phase, s.Message)
	fmt.Fprintf(w, "  Commit         %s (pushed with %s)\n", shortSHA(s.Commit), s.Tool)
	if s.PushToCanary > 0 {
		fmt.Fprintf(w, "  Push → canary  %s until a client first got an answer from %s\n", round(s.PushToCanary), CanaryVersion)
	} else {
		fmt.Fprintf(w, "  Push → canary  no client ever got an answer from %s\n", CanaryVersion)
	}
	fmt.Fprintf(w, "  Push → end     %s\n", round(s.PushToEnd))
	if len(s.Steps) > 0 {
		fmt.Fprintln(w, "  Timeline (since the push)")
		for _, st := range s.Steps {
			fmt.Fprintf(w, "    +%-7s %-17s %s\n", round(st.At), st.Type, st.Message)
		}
	}
	if len(s.Runs) > 0 {
		fmt.Fprintln(w, "  Verdicts")
		for _, r := range s.Runs {
			for _, m := range r.Metrics {
				line := fmt.Sprintf("    %-16s %-14s %-14s last value %s", r.Name, m.Name, verdict(string(m.Phase)), dash(m.Value))
				if m.Message != "" {
					line += "  " + m.Message
				}
				fmt.Fprintln(w, line)
			}
		}
	}
	if len(s.Alerts) > 0 {
		loud := loudAlerts(s.Alerts)
		fmt.Fprintf(w, "  Alerts         %d received by the webhook sink (%s)\n", len(s.Alerts), alertCounts(s.Alerts))
		for _, a := range loud {
			fmt.Fprintf(w, "    %-17s %-7s %s\n", a.Event, a.Severity, a.Reason)
		}
	}
	d := s.Observed.Class[probe.DefaultClass]
	fmt.Fprintf(w, "  Final traffic  %s (last %s)\n", shares(d), s.Observed.Window.Round(time.Second))
}

// alertCounts is "rollout-started, step-completed ×6, ..." in arrival order.
func alertCounts(as []Received) string {
	var order []alert.Event
	n := map[alert.Event]int{}
	for _, a := range as {
		if n[a.Event] == 0 {
			order = append(order, a.Event)
		}
		n[a.Event]++
	}
	parts := make([]string, len(order))
	for i, e := range order {
		parts[i] = string(e)
		if n[e] > 1 {
			parts[i] += fmt.Sprintf(" ×%d", n[e])
		}
	}
	return strings.Join(parts, ", ")
}

func shortSHA(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return dash(c)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// round keeps durations readable: milliseconds under a second, tenths of
// a second above.
func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
