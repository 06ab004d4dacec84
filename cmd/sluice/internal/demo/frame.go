package demo

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/view"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestersClass is the load generator's class of requests that carry the
// testers header.
const TestersClass = "testers"

// Frame is everything the live view shows at one moment.
type Frame struct {
	// Elapsed is the time since the demo started.
	Elapsed time.Duration
	// Stage says what the demo itself is doing ("pushing demo/app:v2").
	Stage string
	// Status is the rollout's status; nil until the daemon knows it.
	Status *httpapi.RolloutStatus
	// Observed is the load generator's view of the last window.
	Observed probe.Observation
	// Events are the rollout's recent events, oldest first.
	Events []httpapi.Event
	// Alerts are what the webhook sink received, oldest first.
	Alerts []Received
}

// maxEvents and maxAlerts bound the frame's height.
const (
	maxEvents = 6
	maxAlerts = 3
)

// Render writes the frame as a block of lines, the same on a terminal and
// in a golden file.
func Render(w io.Writer, f Frame) {
	fmt.Fprintf(w, "sluice demo  %s  rollout %s/%s  %s\n", clock(f.Elapsed), Namespace, RolloutName, f.Stage)
	s := f.Status
	if s == nil {
		fmt.Fprintln(w, "  Phase     (waiting for the daemon's first sync)")
	} else {
		fmt.Fprintf(w, "  Phase     %-12s %s\n", s.Phase, s.Message)
		canary := s.CanaryVersion
		if canary == "" {
			canary = "-"
		}
		if s.Aborted {
			canary += " (aborted)"
		}
		fmt.Fprintf(w, "  Declared  %s   stable %s  canary %s\n", view.Bar(s.Weights, 20), s.StableVersion, canary)
	}
	fmt.Fprintf(w, "  Observed  %s\n", observedLine(f.Observed, stableOf(s)))
	if t := f.Observed.Class[TestersClass]; t.Total() > 0 {
		fmt.Fprintf(w, "  Testers   %s: %s → %s\n", HeaderName, HeaderValue, shares(t))
	}
	if s != nil && len(s.AnalysisRuns) > 0 {
		fmt.Fprintln(w, "  Analysis")
		for _, r := range s.AnalysisRuns {
			for _, m := range r.Metrics {
				val := m.Value
				if val == "" {
					val = "-"
				}
				line := fmt.Sprintf("    %-16s %-14s %-12s value %s", r.Name, m.Name, verdict(string(m.Phase)), val)
				if m.Message != "" {
					line += "  " + m.Message
				}
				fmt.Fprintln(w, line)
			}
			if len(r.Metrics) == 0 {
				fmt.Fprintf(w, "    %-16s %s\n", r.Name, verdict(string(r.Phase)))
			}
		}
	}
	if s != nil {
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  Error     %s:%d: %s: %s\n", e.File, e.Line, e.Field, e.Message)
		}
	}
	if ev := tail(notable(f.Events), maxEvents); len(ev) > 0 {
		fmt.Fprintln(w, "  Events")
		for _, e := range ev {
			fmt.Fprintf(w, "    %s  %-17s %s\n", e.Time.UTC().Format("15:04:05"), e.Type, e.Message)
		}
	}
	if len(f.Alerts) > 0 {
		loud := loudAlerts(f.Alerts)
		fmt.Fprintf(w, "  Alerts    %d received by the local webhook sink, %d warnings or errors\n", len(f.Alerts), len(loud))
		for _, a := range tail(loud, maxAlerts) {
			fmt.Fprintf(w, "    %s  %-17s %-7s %s\n", a.At.UTC().Format("15:04:05"), a.Event, a.Severity, a.Reason)
		}
	}
}

// notable drops "status" events: the Phase line already shows them.
func notable(evs []httpapi.Event) []httpapi.Event {
	var out []httpapi.Event
	for _, e := range evs {
		if e.Type != "status" {
			out = append(out, e)
		}
	}
	return out
}

// loudAlerts are the alerts above info: the events list already tells the
// info ones (started, step completed, completed).
func loudAlerts(as []Received) []Received {
	var out []Received
	for _, a := range as {
		if a.Severity != alert.SeverityInfo {
			out = append(out, a)
		}
	}
	return out
}

func tail[T any](xs []T, n int) []T {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

func stableOf(s *httpapi.RolloutStatus) string {
	if s == nil {
		return StableVersion
	}
	return s.StableVersion
}

// observedLine is the split of untagged calls, drawn like the declared
// one ('#' for the stable version, '.' for anything else) so the two can
// be compared at a glance, then each version's share.
func observedLine(o probe.Observation, stable string) string {
	d := o.Class[probe.DefaultClass]
	n := d.Answered()
	if n == 0 {
		if d.Total() > 0 {
			return fmt.Sprintf("no answers yet (%d calls failed without reaching a backend)", d.Total())
		}
		return "no calls yet"
	}
	others := int32(math.Round((1 - d.Share(stable)) * 100))
	parts := []string{fmt.Sprintf("%s %.1f%%", stable, d.Share(stable)*100)}
	failed := d[stable].Failed
	for _, v := range d.Versions() {
		if v != stable && d[v].Total() > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", v, d.Share(v)*100))
			failed += d[v].Failed
		}
	}
	line := fmt.Sprintf("%s   %s of %d calls in the last %s", view.Bar(api.Weights{Stable: 100 - others, Canary: others}, 20),
		strings.Join(parts, ", "), n, o.Window.Round(time.Second))
	if failed > 0 {
		line += fmt.Sprintf(" (%d failed)", failed)
	}
	return line
}

// shares lists each version's share of a class, by version name.
func shares(s probe.Split) string {
	var parts []string
	for _, v := range s.Versions() {
		if s[v].Total() == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", v, s.Share(v)*100))
	}
	if len(parts) == 0 {
		return "no answers yet"
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" of %d", s.Answered())
}

// verdict marks finished analysis phases so they stand out in a stream of
// Running lines.
func verdict(phase string) string {
	switch phase {
	case "Successful":
		return "✓ " + phase
	case "Failed", "Error":
		return "✗ " + phase
	case "Inconclusive":
		return "? " + phase
	}
	return phase
}

// clock formats a duration as mm:ss.t.
func clock(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	m := int(d / time.Minute)
	s := (d % time.Minute).Seconds()
	return fmt.Sprintf("%02d:%04.1f", m, s)
}
