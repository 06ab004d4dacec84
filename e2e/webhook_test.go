package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// postHook sends a generic webhook signed with secret and returns the
// status code.
func postHook(t testing.TB, d *daemon, secret []byte) int {
	t.Helper()
	body := []byte(`{"ref": "refs/heads/main"}`)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, d.url+"/hook/generic", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebhookFetch: with --interval 1h a push is picked up only when a
// verified webhook arrives (a forged one is refused and fetches nothing),
// and the commit-to-traffic time the daemon measures agrees with what the
// clients observe, from the moment the commit was fetched, within 100 ms. How fast that is is measured by
// BenchmarkCommitToTraffic.
func TestWebhookFetch(t *testing.T) {
	t.Parallel()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	repo := newGitRepo(t)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("  s3cret-for-e2e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := rolloutSpec{Name: "hooked", Host: "hooked.e2e", Version: v1, Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc},
		Steps: "- setWeight: 50\n- pause: {}\n"}
	repo.push("v1", map[string]string{"hooked.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--interval", "1h", "--webhook-secret-file", secretFile)
	d.waitStatus("hooked", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 300})
	if _, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v1); err != nil {
		t.Fatal(err)
	}
	countBefore := d.metric("sluice_commit_to_traffic_seconds_count")
	sumBefore := d.metric("sluice_commit_to_traffic_seconds_sum")

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"hooked.yaml": spec.yaml()})
	if code := postHook(t, d, []byte("wrong secret")); code != http.StatusUnauthorized {
		t.Fatalf("forged webhook answered %d, want 401", code)
	}
	// Nothing may fetch the push before the real webhook: give a wrong
	// poll or the forged hook time to act, and check it did not.
	time.Sleep(time.Second)
	if st, _ := d.status("hooked"); st.Commit == commit {
		t.Fatalf("commit fetched without a valid webhook (interval 1h): %+v", st)
	}
	if _, seen := lg.FirstSeen(v2); seen {
		t.Fatal("v2 answered before the webhook")
	}

	hookAt := time.Now()
	if code := postHook(t, d, []byte("s3cret-for-e2e")); code != http.StatusAccepted {
		t.Fatalf("webhook answered %d, want 202", code)
	}
	first, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v2)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's clock starts when it has fetched the commit (its "new
	// revision" log line), not when the hook arrived: the fetch in between
	// is git's time and grows with the machine's load.
	clients := first.Sub(revisionSeen(t, d, commit))
	t.Logf("webhook to first v2 answer at the clients: %v", first.Sub(hookAt))
	deadline := time.Now().Add(10 * time.Second)
	for d.metric("sluice_commit_to_traffic_seconds_count") <= countBefore {
		if time.Now().After(deadline) {
			t.Fatal("sluice_commit_to_traffic_seconds has no new observation")
		}
		time.Sleep(50 * time.Millisecond)
	}
	daemon := time.Duration((d.metric("sluice_commit_to_traffic_seconds_sum") - sumBefore) * float64(time.Second))
	t.Logf("commit fetched to first v2 answer at the clients: %v; sluice_commit_to_traffic_seconds: %v", clients, daemon)
	if diff := math.Abs(float64(clients - daemon)); diff > float64(100*time.Millisecond) {
		t.Errorf("clients (%v) and sluice_commit_to_traffic_seconds (%v) differ by more than 100ms", clients, daemon)
	}
	st := d.waitStatus("hooked", 10*time.Second, "canary at 50%", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Weights.Canary == 50
	})
	if st.CanaryVersion != v2 {
		t.Fatalf("status after the webhook: %+v", st)
	}
}

// revisionSeen is when the daemon logged that it fetched commit.
func revisionSeen(t *testing.T, d *daemon, commit string) time.Time {
	t.Helper()
	for _, line := range strings.Split(d.log.String(), "\n") {
		var l struct {
			Time   time.Time `json:"time"`
			Msg    string    `json:"msg"`
			Commit string    `json:"commit"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "new revision" && l.Commit == commit {
			return l.Time
		}
	}
	t.Fatalf("no \"new revision\" log line for %s", commit)
	return time.Time{}
}
