package view

import (
	"fmt"
	"io"

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
