package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestWipedStateRerunsTheCanary: the state dir is wiped while v2 is paused
// as a canary. The restarted daemon finds v1 before v2 in git's history:
// v1 is stable again and v2 runs from step 1, so it pauses again and only
// a promote makes it stable; real xDS clients never see more than the
// step's weight. With --recover-from none the old behaviour (v2 stable at
// once) is kept, which shows the test can fail.
func TestWipedStateRerunsTheCanary(t *testing.T) {
	for _, tt := range []struct {
		recoverFrom string
		wantStable  string
	}{
		{RecoverFromGit, "web:v1"},
		{RecoverFromNone, "web:v2"},
	} {
		t.Run(tt.recoverFrom, func(t *testing.T) {
			w := newWorld(t)
			w.push("v1", map[string]string{"web.yaml": w.rollout("web:v1", 30)})
			r := w.start()
			r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy && s.StableVersion == "web:v1" })
			w.push("v2", map[string]string{"web.yaml": w.rollout("web:v2", 30)})
			r.waitStatus(t, "paused at 30", func(s rollout.Status) bool { return s.Phase == rollout.PhasePaused && s.Weights.Canary == 30 })
			r.stop()
			if err := os.RemoveAll(filepath.Join(w.stateDir, "sluice.db")); err != nil {
				t.Fatal(err)
			}

			hook := newAlertHook(t)
			r = w.startWith(func(o *Options) { o.RecoverFrom, o.AlertWebhooks = tt.recoverFrom, []string{hook.URL} })
			after := r.waitStatus(t, "settled after the wipe", func(s rollout.Status) bool {
				return s.Phase == rollout.PhasePaused || s.Phase == rollout.PhaseHealthy
			})
			if after.StableVersion != tt.wantStable {
				t.Fatalf("after the wipe: stable %s, want %s (%s: %s)", after.StableVersion, tt.wantStable, after.Phase, after.Message)
			}
			if tt.recoverFrom == RecoverFromNone {
				return
			}
			if after.CanaryVersion != "web:v2" || after.Weights.Canary != 30 || after.StepIndex != 1 {
				t.Fatalf("after the wipe: canary %q at step %d, %d%%; want web:v2 paused at step 2, 30%%", after.CanaryVersion, after.StepIndex+1, after.Weights.Canary)
			}
			split := r.clientSplit(t, 600)
			if share := float64(split["web:v2"]) / float64(split["web:v1"]+split["web:v2"]); share > 0.4 {
				t.Fatalf("clients see %.0f%% canary after the wipe, more than the step's 30%%: %v", 100*share, split)
			}
			hook.waitFor(t, func(a alert.Alert) bool {
				return a.Event == alert.EventStateRecovered && strings.Contains(a.Reason, "web:v1 stays stable and web:v2 runs as a canary from step 1")
			})
			if _, err := r.d.Runner().Command(context.Background(), key, rollout.CmdPromote); err != nil {
				t.Fatal(err)
			}
			r.waitStatus(t, "promoted", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy && s.StableVersion == "web:v2" })
		})
	}
}

// alertHook is a webhook receiver that keeps the alerts it got.
type alertHook struct {
	*httptest.Server
	mu     sync.Mutex
	alerts []alert.Alert
}

func newAlertHook(t *testing.T) *alertHook {
	h := &alertHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var a alert.Alert
		if err := json.NewDecoder(r.Body).Decode(&a); err == nil {
			h.mu.Lock()
			h.alerts = append(h.alerts, a)
			h.mu.Unlock()
		}
	}))
	t.Cleanup(h.Close)
	return h
}

// waitFor waits until an alert matches.
func (h *alertHook) waitFor(t *testing.T, match func(alert.Alert) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for _, a := range h.alerts {
			if match(a) {
				h.mu.Unlock()
				return
			}
		}
		h.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Fatalf("no matching alert among %+v", h.alerts)
}
