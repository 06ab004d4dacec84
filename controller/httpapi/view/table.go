package view

import (
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/controller/httpapi"
)

// Table writes the `sluice get rollouts` table.
func Table(w io.Writer, items []httpapi.RolloutStatus) error {
	tw := newTable(w, 2)
	fmt.Fprintln(tw, "NAME\tPHASE\tSTEP\tWEIGHTS\tSTABLE\tCANARY\tCOMMIT\tAGE\tMESSAGE")
	for _, s := range items {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			s.Namespace, s.Name, orDash(string(s.Phase)), Step(s), Bar(s.Weights, 10),
			orDash(s.StableVersion), orDash(s.CanaryVersion), orDash(short(s.Commit)), Age(s.CreatedAt), s.Message)
	}
	return tw.Flush()
}

// Step is "i/n" counting from 1 for people ("3/6" while the third of six
// steps runs, "6/6" once all are done), or "-" with no steps.
func Step(s httpapi.RolloutStatus) string {
	if s.StepCount == 0 {
		return "-"
	}
	i := min(s.StepIndex+1, s.StepCount)
	return fmt.Sprintf("%d/%d", i, s.StepCount)
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
