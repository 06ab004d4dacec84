package writeback

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
)

// TestSinkSend drives the revert sink with the alerts the runner sends,
// against a real git origin: only rollout-aborted leads to a revert; a
// branch someone changed is left alone and said so in a follow-up alert;
// a file sluice cannot edit is reported, not retried; what happened is
// kept for the status.
func TestSinkSend(t *testing.T) {
	tests := []struct {
		name string
		// file is the strategy file at the branch head.
		file       string
		event      alert.Event
		stable     string
		wantRevert string // the record's Revert
		wantAlert  alert.Event
		wantMoved  bool
	}{
		{name: "abort reverts", file: rolloutFile(v2), event: alert.EventRolloutAborted, stable: v1, wantRevert: "reverted", wantMoved: true},
		{name: "other events do nothing", file: rolloutFile(v2), event: alert.EventStepCompleted, stable: v1},
		{name: "no stable to go back to", file: rolloutFile(v2), event: alert.EventRolloutAborted, stable: ""},
		{name: "someone pushed another version", file: rolloutFile(v3), event: alert.EventRolloutAborted, stable: v1,
			wantRevert: "superseded", wantAlert: EventWritebackSkipped},
		{name: "aliased image cannot be edited", event: alert.EventRolloutAborted, stable: v1,
			file:       "kind: Rollout\nmetadata: {name: checkout, labels: {img: &img " + v2 + "}}\nspec: {template: {spec: {containers: [{image: *img}]}}}\n",
			wantRevert: "failed", wantAlert: EventWritebackFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, filepath.Join(t.TempDir(), "origin.git"))
			u.commit("v1", map[string]string{"deploy/checkout.yaml": rolloutFile(v1)}, false)
			head := u.commit("head", map[string]string{"deploy/checkout.yaml": tt.file}, false)
			var mu sync.Mutex
			var sent []alert.Alert
			records := NewRecords()
			sink, err := NewSink(SinkOptions{
				Reverter: newTestReverter(t, localRemote(t, u), ""),
				Stable:   func(k api.Key) (string, bool) { return tt.stable, k == checkout },
				Notify: func(a alert.Alert) error {
					mu.Lock()
					defer mu.Unlock()
					sent = append(sent, a)
					return nil
				},
				Records: records,
			})
			if err != nil {
				t.Fatal(err)
			}
			a := alert.Alert{ID: "default/checkout/" + head[:7] + "/aborted/1", Event: tt.event, Rollout: "default/checkout",
				Version: v2, Commit: head, Reason: "analysis success-rate failed"}
			if err := sink.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if moved := u.head() != head; moved != tt.wantMoved {
				t.Errorf("branch moved: %v, want %v", moved, tt.wantMoved)
			}
			rec, _ := records.Get(checkout)
			if rec.Revert != tt.wantRevert {
				t.Errorf("record %+v, want revert %q", rec, tt.wantRevert)
			}
			if tt.wantAlert == "" {
				if len(sent) != 0 {
					t.Errorf("follow-up alerts %+v, want none", sent)
				}
				return
			}
			if len(sent) != 1 || sent[0].Event != tt.wantAlert || sent[0].ID != a.ID+"/"+string(tt.wantAlert) || sent[0].Reason == "" {
				t.Fatalf("follow-up alerts %+v, want one %s", sent, tt.wantAlert)
			}
		})
	}
}

// TestSinkPullRequest: with --git-writeback-branch and a forge, the revert
// goes to its own branch and a pull request is opened from it (the forge
// is the local server checking GitHub's API).
func TestSinkPullRequest(t *testing.T) {
	u := newUpstream(t, filepath.Join(t.TempDir(), "origin.git"))
	canary := startCanary(u)
	fake, forge := startForge(t, forgeAPIs[0], http.StatusCreated, forgeToken)
	records := NewRecords()
	sink, err := NewSink(SinkOptions{
		Reverter: newTestReverter(t, localRemote(t, u), "sluice/revert"),
		Stable:   func(api.Key) (string, bool) { return v1, true },
		Forge:    forge, Records: records,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = sink.Send(context.Background(), alert.Alert{ID: "x", Event: alert.EventRolloutAborted, Rollout: "default/checkout",
		Version: v2, Commit: canary, Reason: "analysis failed"})
	if err != nil {
		t.Fatal(err)
	}
	if u.head() != canary {
		t.Errorf("the protected branch moved")
	}
	rec, _ := records.Get(checkout)
	if rec.PullRequest != "https://github.example/org/repo/pull/7" || rec.RevertBranch != "sluice/revert" {
		t.Errorf("record %+v", rec)
	}
	if len(fake.got) != 1 || fake.got[0]["head"] != "sluice/revert" || fake.got[0]["base"] != "main" ||
		!strings.Contains(fake.got[0]["title"].(string), "default/checkout") {
		t.Errorf("pull request asked for %+v", fake.got)
	}
}

// TestStatusSink: which alert posts which status, and a forge's refusal
// comes back as an error the outbox classifies.
func TestStatusSink(t *testing.T) {
	tests := []struct {
		event     alert.Event
		code      int
		wantState string // "" = no call
		wantErr   bool
	}{
		{event: alert.EventRolloutStarted, code: http.StatusCreated, wantState: "pending"},
		{event: alert.EventStepCompleted, code: http.StatusCreated, wantState: "pending"},
		{event: alert.EventRolloutCompleted, code: http.StatusCreated, wantState: "success"},
		{event: alert.EventRolloutAborted, code: http.StatusCreated, wantState: "failure"},
		{event: alert.EventAnalysisFailed, code: http.StatusCreated},
		{event: alert.EventRolloutAborted, code: http.StatusNotFound, wantState: "failure", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.event)+"/"+http.StatusText(tt.code), func(t *testing.T) {
			fake, forge := startForge(t, forgeAPIs[0], tt.code, forgeToken)
			records := NewRecords()
			sink, err := NewStatusSink(StatusSinkOptions{Forge: forge, Records: records,
				TargetURL: func(k api.Key) string { return "http://sluice/api/v1/rollouts/" + k.String() }})
			if err != nil {
				t.Fatal(err)
			}
			err = sink.Send(context.Background(), alert.Alert{Event: tt.event, Rollout: "default/checkout", Version: v2, Commit: sha, Reason: "why"})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantState == "" {
				if len(fake.got) != 0 {
					t.Errorf("calls %+v, want none", fake.got)
				}
				return
			}
			if len(fake.got) != 1 || fake.got[0]["state"] != tt.wantState || fake.got[0]["context"] != "sluice/default/checkout" {
				t.Fatalf("calls %+v, want one %s", fake.got, tt.wantState)
			}
			rec, _ := records.Get(checkout)
			if tt.wantErr != (rec.StatusError != "") || !tt.wantErr && rec.Status != tt.wantState {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

// TestStatusSinkHonoursRateLimit: a 429 with Retry-After holds the status
// sink (and only it: each sink has its own outbox worker) before the
// error goes back to the outbox, which retries it.
func TestStatusSinkHonoursRateLimit(t *testing.T) {
	_, forge := startForge(t, forgeAPIs[1], http.StatusTooManyRequests, forgeToken) // GitLab: Retry-After: 30
	sink, err := NewStatusSink(StatusSinkOptions{Forge: forge})
	if err != nil {
		t.Fatal(err)
	}
	const patience = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	start := time.Now()
	err = sink.Send(ctx, alert.Alert{Event: alert.EventRolloutAborted, Rollout: "default/checkout", Version: v2, Commit: sha})
	if err == nil || alert.Permanent(err) {
		t.Fatalf("err = %v, want one the outbox retries", err)
	}
	if waited := time.Since(start); waited < patience {
		t.Errorf("returned after %v: the forge's Retry-After was not waited for", waited)
	}
}
