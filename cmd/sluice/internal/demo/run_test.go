package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
)

// TestRun plays the whole demo in-process, sped up, both ways, committing
// with go-git so the fallback for machines without git is exercised too
// (the e2e suite runs the binary with the git command).
func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		fail      bool
		wantPhase string
		wantAlert alert.Event
	}{
		{"promote", false, "Healthy", alert.EventRolloutCompleted},
		{"fail", true, "Degraded", alert.EventRolloutAborted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			sum, err := Run(ctx, Options{Out: &out, Fail: tt.fail, Speed: 4, Rate: 100, Clients: 2, Dir: t.TempDir(), GoGit: true})
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			if sum.Phase != tt.wantPhase || sum.Tool != "go-git" || len(sum.Commit) != 40 {
				t.Errorf("summary phase %s tool %s commit %q", sum.Phase, sum.Tool, sum.Commit)
			}
			if sum.PushToCanary <= 0 || sum.PushToCanary > sum.PushToEnd {
				t.Errorf("push to canary %v, push to end %v", sum.PushToCanary, sum.PushToEnd)
			}
			if !hasAlert(sum.Alerts, tt.wantAlert) {
				t.Errorf("no %s alert at the sink: %+v", tt.wantAlert, sum.Alerts)
			}
			final := sum.Observed.Class["default"]
			wantOn := CanaryVersion
			if tt.fail {
				wantOn = StableVersion
			}
			if final.Share(wantOn) != 1 {
				t.Errorf("final observed traffic %v, want all on %s", final, wantOn)
			}
			if !strings.Contains(out.String(), "Summary") {
				t.Errorf("no summary printed:\n%s", out.String())
			}
		})
	}
}
