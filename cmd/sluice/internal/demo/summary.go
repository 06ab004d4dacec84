package demo

import (
	"fmt"
	"io"
	"strings"
	"time"

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

// StepMark is one step the rollout entered.
type StepMark struct {
	At   time.Duration // since the push
	Step string        // "step 2/6: header route testers"
}

// Recorder follows frames and remembers the steps and the latest status of
// every analysis run, for the Summary.
type Recorder struct {
	pushed   time.Duration // Frame.Elapsed of the push; <0 before it
	steps    []StepMark
	lastStep string
	runs     []rollout.RunStatus
	last     *httpapi.RolloutStatus
	observed probe.Observation
}

// NewRecorder returns a recorder waiting for the push.
func NewRecorder() *Recorder { return &Recorder{pushed: -1} }

// Pushed marks the push of the canary version at elapsed.
func (r *Recorder) Pushed(elapsed time.Duration) { r.pushed = elapsed }

// Observe takes one frame. Frames before the push are ignored: they show
// the stable version settling, not the rollout.
func (r *Recorder) Observe(f Frame) {
	if r.pushed < 0 || f.Status == nil {
		return
	}
	s := f.Status
	r.last, r.observed = s, f.Observed
	if s.CanaryVersion == "" && s.Phase == rollout.PhaseHealthy && len(r.steps) == 0 {
		return // the push has not been seen yet
	}
	step := stepOf(*s)
	if step != "" && step != r.lastStep {
		r.lastStep = step
		r.steps = append(r.steps, StepMark{At: f.Elapsed - r.pushed, Step: step})
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

// stepOf is the step part of a status message, without the notes in
// parentheses that come and go within a step ("waiting for xDS ACK").
func stepOf(s httpapi.RolloutStatus) string {
	switch {
	case s.Phase == rollout.PhaseHealthy:
		return "promoted: " + s.Message
	case s.Aborted:
		return s.Message
	}
	m := s.Message
	if i := strings.Index(m, " ("); i > 0 {
		m = m[:i]
	}
	if !strings.HasPrefix(m, "step ") {
		return ""
	}
	return m
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
		fmt.Fprintln(w, "  Steps")
		for _, st := range s.Steps {
			fmt.Fprintf(w, "    +%-7s %s\n", round(st.At), st.Step)
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
		fmt.Fprintf(w, "  Alerts         %d received by the webhook sink\n", len(s.Alerts))
		for _, a := range s.Alerts {
			fmt.Fprintf(w, "    %-17s %-7s %s\n", a.Event, a.Severity, a.Reason)
		}
	}
	d := s.Observed.Class[probe.DefaultClass]
	fmt.Fprintf(w, "  Final traffic  %s (last %s)\n", shares(d), s.Observed.Window.Round(time.Second))
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
