package view

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// traffic writes the split per version with its xDS ACK state: whether
// every connected client has ACKed the weights shown, or which push the
// daemon still waits for.
func traffic(w io.Writer, s httpapi.RolloutStatus) error {
	// A zero Traffic comes from a server older than the field.
	if t := s.Traffic; s.StableVersion == "" || t.Generation == 0 && t.AckedGeneration == 0 && !t.Acked && !t.AckTimedOut {
		return nil
	}
	ack := "ACKed by every connected xDS client"
	if t := s.Traffic; !t.Acked {
		ack = fmt.Sprintf("waiting for the xDS clients to ACK push %d (last ACKed %d)", t.Generation, t.AckedGeneration)
	}
	if s.Traffic.AckTimedOut {
		ack += "; an earlier step went on without its ACK"
	}
	fmt.Fprintln(w, "\nTraffic:")
	tw := newTable(w, 2)
	fmt.Fprintf(tw, "  stable\t%s\t%d%%\t%s\n", orDash(s.StableVersion), s.Weights.Stable, ack)
	if s.CanaryVersion != "" {
		fmt.Fprintf(tw, "  canary\t%s\t%d%%\t%s\n", s.CanaryVersion, s.Weights.Canary, ack)
	}
	if s.Weights.Baseline > 0 { // the baseline runs the stable version
		fmt.Fprintf(tw, "  baseline\t%s\t%d%%\t%s\n", s.StableVersion, s.Weights.Baseline, ack)
	}
	return tw.Flush()
}

// clients writes the xDS clients connected to the daemon that answered
// and hold the rollout's host: node, what it ACKed, whether that is the
// current routes, and its NACK. Nothing when the status does not say
// (the list, an older server, a rollout not served over xDS).
func clients(w io.Writer, t rollout.TrafficStatus) error {
	if t.Clients == nil {
		return nil
	}
	if len(t.Clients) == 0 {
		fmt.Fprintln(w, "\nxDS clients: none connected to this sluice")
		return nil
	}
	total := max(t.ClientCount, len(t.Clients))
	if total > len(t.Clients) {
		fmt.Fprintf(w, "\nxDS clients (%d of %d, those without the current routes first):\n", len(t.Clients), total)
	} else {
		fmt.Fprintf(w, "\nxDS clients (%d):\n", total)
	}
	tw := newTable(w, 2)
	fmt.Fprintln(tw, "  NODE\tLOCALITY\tTRANSPORT\tACKED\tCURRENT\tNACK")
	for _, c := range t.Clients {
		current := "no"
		if c.Current {
			current = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", orDash(c.Node), orDash(c.Locality), orDash(c.Transport), orDash(c.Version), current, orDash(oneLine(c.Nack)))
	}
	return tw.Flush()
}

// oneLine keeps a client's message on its line of the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// timeline writes the steps: done, current, held or aborted (with why),
// pending.
func timeline(w io.Writer, steps []rollout.StepStatus) error {
	if len(steps) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nSteps:")
	tw := newTable(w, 2)
	for i, st := range steps {
		line := fmt.Sprintf("  %s\t%d. %s", st.State, i+1, st.Name)
		if st.Reason != "" {
			line += ": " + st.Reason
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
