package view

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Detail writes the readable view of one rollout: phase and message, step,
// a weight bar, versions, header routes, analysis runs with their latest
// values, load errors, and the last events (oldest first).
func Detail(w io.Writer, s httpapi.RolloutStatus, events []httpapi.Event) error {
	tw := newTable(w, 1)
	fmt.Fprintf(tw, "Rollout:\t%s/%s\n", s.Namespace, s.Name)
	if s.Strategy == api.StrategyBlueGreen {
		fmt.Fprintf(tw, "Strategy:\tblue-green (stable is the active version, canary the preview)\n")
	}
	if w := s.Wave; w != nil {
		fmt.Fprintf(tw, "Cluster:\t%s, wave %d/%d (%s)\n", w.Cluster, w.Wave, w.Waves, orDash(w.Reason))
		if w.Program != "" {
			fmt.Fprintf(tw, "Waves:\t%s\n", w.Program)
		}
	}
	phase := orDash(string(s.Phase))
	if s.PhaseSince != "" {
		phase += " (for " + Age(s.PhaseSince) + ")"
	}
	fmt.Fprintf(tw, "Phase:\t%s\n", phase)
	if s.Message != "" {
		fmt.Fprintf(tw, "Message:\t%s\n", s.Message)
	}
	fmt.Fprintf(tw, "Step:\t%s\n", Step(s))
	if s.Weights.Baseline > 0 {
		fmt.Fprintf(tw, "Weights:\t%s  (stable %d%%, canary %d%%, baseline %d%%)\n", Bar(s.Weights, 20), s.Weights.Stable, s.Weights.Canary, s.Weights.Baseline)
	} else {
		fmt.Fprintf(tw, "Weights:\t%s  (stable %d%%, canary %d%%)\n", Bar(s.Weights, 20), s.Weights.Stable, s.Weights.Canary)
	}
	fmt.Fprintf(tw, "Stable:\t%s\n", orDash(s.StableVersion))
	canary := orDash(s.CanaryVersion)
	if s.Aborted {
		canary += "  (aborted)"
	}
	fmt.Fprintf(tw, "Canary:\t%s\n", canary)
	fmt.Fprintf(tw, "Commit:\t%s\n", orDash(s.Commit))
	fmt.Fprintf(tw, "Age:\t%s\n", Age(s.CreatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}

	if err := traffic(w, s); err != nil {
		return err
	}
	if err := clients(w, s.Traffic); err != nil {
		return err
	}
	if err := timeline(w, s.Steps); err != nil {
		return err
	}
	if err := replicaSets(w, s.ReplicaSets); err != nil {
		return err
	}
	gitWriteback(w, s.Writeback)
	if len(s.HeaderRoutes) > 0 {
		fmt.Fprintln(w, "\nHeader routes (to canary):")
		for _, r := range s.HeaderRoutes {
			fmt.Fprintf(w, "  %s: %s\n", r.Name, matches(r.Match))
		}
	}
	if len(s.MirrorRoutes) > 0 {
		fmt.Fprintln(w, "\nMirror routes (copies to canary):")
		for _, r := range s.MirrorRoutes {
			fmt.Fprintf(w, "  %s: %d%% of %s\n", r.Name, r.Percentage, routeMatches(r.Match))
		}
	}
	if len(s.AnalysisRuns) > 0 {
		fmt.Fprintln(w, "\nAnalysis runs:")
		tw = newTable(w, 2)
		for _, r := range s.AnalysisRuns {
			fmt.Fprintf(tw, "  %s\t%s\t\t\n", r.Name, r.Phase)
			for _, m := range r.Metrics {
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", m.Name, m.Phase, orDash(m.Value), m.Message)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Errors) > 0 {
		fmt.Fprintln(w, "\nErrors:")
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  %s\n", diagnostic(e.File, e.Line, e.Field, e.Message))
		}
	}
	if len(events) > 0 {
		fmt.Fprintln(w, "\nEvents:")
		for i, e := range events {
			if i > 0 && Repeats(events[i-1], e) {
				continue
			}
			fmt.Fprintf(w, "  %s  %-18s %s\n", e.Time.UTC().Format("15:04:05"), e.Type, e.Message)
		}
	}
	return nil
}

// EventLine is one event as a log line, for --watch when the output is not
// a terminal: time, rollout, type, message and the status it led to.
func EventLine(e httpapi.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s %s", e.Time.UTC().Format("2006-01-02T15:04:05Z"), e.Namespace, e.Name, e.Type)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if s := e.Status; s != nil {
		fmt.Fprintf(&b, " [%s step %s weights %d/%d]", s.Phase, Step(*s), s.Weights.Stable, s.Weights.Canary)
	}
	return b.String()
}

// StatusLine is a one-line summary, printed by --watch when it starts
// without a terminal and by the command verbs.
func StatusLine(s httpapi.RolloutStatus) string {
	line := fmt.Sprintf("%s/%s %s step %s weights %d/%d", s.Namespace, s.Name, orDash(string(s.Phase)), Step(s), s.Weights.Stable, s.Weights.Canary)
	if s.Message != "" {
		line += ": " + s.Message
	}
	return line
}

func matches(ms []api.HeaderMatch) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		v := m.HeaderValue
		switch {
		case v.Exact != "":
			parts = append(parts, fmt.Sprintf("%s = %q", m.HeaderName, v.Exact))
		case v.Prefix != "":
			parts = append(parts, fmt.Sprintf("%s starts with %q", m.HeaderName, v.Prefix))
		case v.Regex != "":
			parts = append(parts, fmt.Sprintf("%s ~ /%s/", m.HeaderName, v.Regex))
		default:
			parts = append(parts, m.HeaderName+" present")
		}
	}
	return strings.Join(parts, " and ")
}

func diagnostic(file string, line int, field, msg string) string {
	s := file
	if line > 0 {
		s += fmt.Sprintf(":%d", line)
	}
	s += ": "
	if field != "" {
		s += field + ": "
	}
	return s + msg
}

// Repeats reports whether e says nothing that prev did not: same type,
// message and status summary. The daemon may publish a status more than
// once per transition; people need to see it once.
func Repeats(prev, e httpapi.Event) bool {
	if prev.Namespace != e.Namespace || prev.Name != e.Name || prev.Type != e.Type || prev.Message != e.Message {
		return false
	}
	if (prev.Status == nil) != (e.Status == nil) {
		return false
	}
	return e.Status == nil || StatusLine(*prev.Status) == StatusLine(*e.Status)
}

// gitWriteback writes what sluice wrote back to git (--git-writeback):
// the revert and where it went, the commit status, or why not.
func gitWriteback(w io.Writer, wb *rollout.WritebackStatus) {
	if wb == nil {
		return
	}
	fmt.Fprintln(w, "\nGit writeback:")
	if wb.Revert != "" {
		line := "  revert: " + wb.Revert
		if wb.RevertCommit != "" {
			line += " " + short(wb.RevertCommit) + " on " + wb.RevertBranch
		}
		if wb.PullRequest != "" {
			line += ", " + wb.PullRequest
		}
		fmt.Fprintln(w, line)
		if wb.Message != "" {
			fmt.Fprintf(w, "    %s\n", wb.Message)
		}
	}
	if wb.Status != "" || wb.StatusError != "" {
		line := "  commit status: " + orDash(wb.Status) + " on " + short(wb.StatusCommit)
		if wb.StatusError != "" {
			line += " (last post failed: " + wb.StatusError + ")"
		}
		fmt.Fprintln(w, line)
	}
}

// replicaSets writes the rollout's ReplicaSets (Kubernetes mode) as
// `kubectl argo rollouts get` lists them: version, role, desired/ready
// and where the Ready pods run; a pod that waits for a node says why.
func replicaSets(w io.Writer, sets []rollout.ReplicaSetStatus) error {
	if len(sets) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nReplicaSets:")
	tw := newTable(w, 2)
	fmt.Fprintln(tw, "  NAME\tROLE\tVERSION\tDESIRED\tREADY\tZONES")
	for _, rs := range sets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\n", rs.Name, orDash(rs.Role), orDash(rs.Version), rs.Desired, rs.Ready, zones(rs.Zones))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, rs := range sets {
		if rs.Unschedulable != "" {
			fmt.Fprintf(w, "  %s: %d pod(s) pending: %s\n", rs.Name, rs.Pending, rs.Unschedulable)
		}
	}
	return nil
}

// zones is "zone-a=2 zone-b=1", sorted, or "-".
func zones(z map[string]int) string {
	if len(z) == 0 {
		return "-"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(z)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, z[name]))
	}
	return strings.Join(parts, " ")
}

// routeMatches describes a mirror route's matches: method, path and
// headers, each condition "and", the matches "or".
func routeMatches(ms []api.RouteMatch) string {
	if len(ms) == 0 {
		return "all requests"
	}
	alts := make([]string, 0, len(ms))
	for _, m := range ms {
		var conds []string
		if m.Method != nil {
			conds = append(conds, "method "+stringMatch(*m.Method))
		}
		if m.Path != nil {
			conds = append(conds, "path "+stringMatch(*m.Path))
		}
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			conds = append(conds, name+" "+stringMatch(m.Headers[name]))
		}
		if len(conds) == 0 {
			conds = append(conds, "all requests")
		}
		alts = append(alts, strings.Join(conds, " and "))
	}
	return strings.Join(alts, ", or ")
}

func stringMatch(m api.StringMatch) string {
	switch {
	case m.Exact != "":
		return fmt.Sprintf("= %q", m.Exact)
	case m.Prefix != "":
		return fmt.Sprintf("starts with %q", m.Prefix)
	case m.Regex != "":
		return fmt.Sprintf("~ /%s/", m.Regex)
	}
	return "present"
}
