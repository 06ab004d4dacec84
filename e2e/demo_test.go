package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDemo runs `sluice demo` and `sluice demo --fail` as a user would
// (sped up), and checks they exit 0 with the story in their output: the
// promotion, or the failed analysis, the rollback and the alert.
func TestDemo(t *testing.T) {
	t.Parallel()
	requireGit(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"promote", []string{"demo", "--speed", "3"}, []string{
			"pushed demo/app:v2", "Progressing", "observed", "testers → demo/app:v2 100%",
			"Outcome        Healthy: stable demo/app:v2 at 100%", "✓ Successful", "Push → canary", "rollout-completed",
		}},
		{"fail", []string{"demo", "--fail", "--speed", "3"}, []string{
			"fails 20% of requests", "✗ Failed", "ALERT at the webhook sink: rollout-aborted (error)",
			"Outcome        Degraded: aborted", "rolled back: all traffic is back on demo/app:v1",
			"Final traffic  demo/app:v1 100%",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			start := time.Now()
			cmd := exec.CommandContext(ctx, sluiceBin, tt.args...)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sluice %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
			t.Logf("sluice %s took %v", strings.Join(tt.args, " "), time.Since(start).Round(100*time.Millisecond))
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "\x1b[") {
				t.Errorf("output to a pipe contains terminal escapes")
			}
		})
	}
}
