package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gitwatch"
)

// TestRevisionsThatCannotApply: a revision refused by a limit, and one
// whose processing panics, each leave the spec in force running and show
// in its status with their commit; the daemon goes on.
func TestRevisionsThatCannotApply(t *testing.T) {
	w := newWorld(t)
	w.push("v1", map[string]string{"web.yaml": w.rollout("web:v1", 30)})
	r := w.start()
	r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })

	tests := []struct {
		name    string
		set     *api.Set
		message string
	}{
		{"over a limit", &api.Set{Refused: true, Diagnostics: api.Diagnostics{{File: "many/f20000.yaml", Message: "more than 20000 strategy files", Severity: api.SeverityError}}},
			"more than 20000 strategy files"},
		// A nil rollout makes the diff panic: it stands for any bug a
		// commit may reach between loading and the runner.
		{"panics while applied", &api.Set{Rollouts: []*api.Rollout{nil}}, "internal error while applying commit"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			commit := strings.Repeat(string(rune('a'+i)), 40)
			rev := gitwatch.Revision{Commit: commit, OldCommit: strings.Repeat("0", 40), Changed: true, Set: tt.set}
			if err := r.d.applySafely(context.Background(), rev); err != nil {
				t.Fatalf("applySafely: %v", err)
			}
			st, _ := r.d.Runner().State(key)
			if st.ErrorCommit != commit || len(st.Errors) == 0 || !strings.Contains(st.Errors[0].Message, tt.message) {
				t.Errorf("status errors %v at commit %s, want %q at %s", st.Errors, st.ErrorCommit, tt.message, commit)
			}
			if st.Spec == nil || st.Phase != rollout.PhaseHealthy || st.StableVersion != "web:v1" {
				t.Errorf("the refused revision moved the rollout: %s, stable %s", st.Phase, st.StableVersion)
			}
		})
	}
}
