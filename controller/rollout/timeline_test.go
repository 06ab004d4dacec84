package rollout

import (
	"fmt"
	"strings"
	"testing"
)

// TestTimeline checks the step list of the status at the moments the
// dashboard draws: each step's state, and why the current one is held.
func TestTimeline(t *testing.T) {
	tests := []struct {
		name    string
		prelude []string
		want    string // state per step, with the reason of a held or aborted one
		acked   bool
	}{
		{"healthy: the last version went through every step", pHealthy, "done done done done done", true},
		{"waiting for the ACK of step 1", pAwaitAck, "current pending pending pending", false},
		{"analysis running", pAnalysis, "done done current pending", true},
		{"paused by operator", pUserPaused, "done held(paused by operator) pending pending", true},
		{"held on inconclusive", pInconclusiv, "done done held(analysis", true},
		{"waiting for approval", pPending, "done held(waiting for approval: weight jump) pending pending", true},
		{"aborted", pAborted, "done aborted(aborted by operator) pending pending", true},
		{"at the final pause", pFinalPause, "done done done done current", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			for _, line := range tt.prelude {
				if _, err := h.run(line); err != nil {
					t.Fatal(err)
				}
			}
			st := h.state.Status()
			var parts []string
			for _, s := range st.Steps {
				p := s.State
				if s.Reason != "" {
					p += fmt.Sprintf("(%s)", s.Reason)
				}
				parts = append(parts, p)
			}
			got := strings.Join(parts, " ")
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("steps = %q, want %q", got, tt.want)
			}
			if st.Traffic.Acked != tt.acked {
				t.Errorf("traffic.acked = %v, want %v (%+v)", st.Traffic.Acked, tt.acked, st.Traffic)
			}
		})
	}
}
