package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report for people: placements, per-domain counts
// with skew, unschedulable pods with reasons, and the explanation.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "rollout %s: %d placed, %d unschedulable, %d nodes\n\n", r.Rollout, len(r.Placements), len(r.Unschedulable), r.Nodes)
	fmt.Fprintf(tw, "POD\tROLE\tNODE\t%s\tTYPE\n", strings.ToUpper(strings.Join(shortKeys(r.TopologyKeys), "\t")))
	for _, p := range r.Placements {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Pod, p.Role, p.Node, strings.Join(p.Domains, "\t"), dash(p.Type))
	}
	fmt.Fprintf(tw, "\nDOMAINS (%s, maxSkew %d)\n", r.DomainKey, r.MaxSkew)
	for _, g := range r.Domains {
		var cells []string
		for _, c := range g.Counts {
			cells = append(cells, fmt.Sprintf("%s=%d", c.Domain, c.Count))
		}
		avoided := ""
		if len(g.Avoided) > 0 {
			avoided = " (avoided: " + strings.Join(g.Avoided, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\tskew %d%s\n", g.Group, strings.Join(cells, " "), g.Skew, avoided)
	}
	if len(r.Unschedulable) > 0 {
		fmt.Fprintf(tw, "\nUNSCHEDULABLE\n")
		for _, u := range r.Unschedulable {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Pod, u.Role, u.Reason)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if r.Explain != nil {
		return r.writeExplain(w)
	}
	return nil
}

func (r *Report) writeExplain(w io.Writer) error {
	ex := r.Explain
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nEXPLAIN %s: %d of %d nodes feasible\n", ex.Pod, ex.Feasible, ex.Nodes)
	if len(ex.Reasons) > 0 {
		fmt.Fprintf(tw, "\nFILTERED\tPLUGIN\tREASON\n")
		for _, rc := range ex.Reasons {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", rc.Count, rc.Plugin, rc.Reason)
		}
		fmt.Fprintf(tw, "\nNODE\tPLUGIN\tDETAIL\n")
		for _, f := range ex.Filtered {
			for _, fl := range f.Failures {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Node, fl.Plugin, dash(fl.Detail))
			}
		}
	}
	if len(ex.Top) > 0 {
		fmt.Fprintf(tw, "\nTOP NODES\tTOTAL")
		for _, ps := range ex.Top[0].Scores {
			fmt.Fprintf(tw, "\t%s (×%d)", ps.Plugin, ps.Weight)
		}
		fmt.Fprintln(tw)
		for _, n := range ex.Top {
			fmt.Fprintf(tw, "%s\t%d", n.Node, n.Total)
			for _, ps := range n.Scores {
				fmt.Fprintf(tw, "\t%d (raw %d)", ps.Normalized, ps.Raw)
			}
			fmt.Fprintln(tw)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write explanation: %w", err)
	}
	return nil
}

// shortKeys drops label prefixes: topology.kubernetes.io/zone → zone.
func shortKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k[strings.LastIndex(k, "/")+1:]
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
