package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// followerBackend serves reads from memory and refuses every command as a
// replica that does not lead.
type followerBackend struct {
	*memBackend
	leader string
}

func (f *followerBackend) Command(context.Context, api.Key, rollout.Command) (RolloutStatus, error) {
	return RolloutStatus{}, &NotLeaderError{Leader: f.leader}
}

func (f *followerBackend) Leader() string { return f.leader }

// TestFollowerRefusesWrites: on a follower's backend, reads answer as on
// the leader, while commands and webhooks answer 503 with Retry-After and
// a JSON body naming the leader; the token is still checked first.
func TestFollowerRefusesWrites(t *testing.T) {
	hook := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	be := &followerBackend{memBackend: newMemBackend(designStatus()), leader: "sluice-7f9c"}
	h, err := New(Options{Backend: be, Token: "s3cr3t", Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tests := []struct {
		name, method, path, auth string
		wantCode                 int
		wantBody                 string
		wantLeader               bool // a 503 naming the leader, with Retry-After
	}{
		{name: "get", method: "GET", path: "/api/v1/rollouts/default/checkout", wantCode: 200, wantBody: `"phase":"Paused"`},
		{name: "list", method: "GET", path: "/api/v1/rollouts", wantCode: 200, wantBody: `"name":"checkout"`},
		{name: "info", method: "GET", path: "/api/v1/info", wantCode: 200, wantBody: `"following":true,"leader":"sluice-7f9c"`},
		{name: "promote", method: "POST", path: "/api/v1/rollouts/default/checkout/promote", auth: "Bearer s3cr3t", wantCode: 503, wantLeader: true},
		{name: "abort", method: "POST", path: "/api/v1/rollouts/default/checkout/abort", auth: "Bearer s3cr3t", wantCode: 503, wantLeader: true},
		{name: "promote without token", method: "POST", path: "/api/v1/rollouts/default/checkout/promote", wantCode: 401},
		{name: "webhook", method: "POST", path: "/hook/github", wantCode: 503, wantLeader: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			req.Header.Set(ClientHeader, "test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("%s %s = %d %s, want %d with %s", tt.method, tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			if !tt.wantLeader {
				return
			}
			var got struct{ Error, Leader string }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("503 body %s: %v", body, err)
			}
			if got.Leader != "sluice-7f9c" || !strings.Contains(got.Error, "leader sluice-7f9c") {
				t.Errorf("503 body %s does not name the leader sluice-7f9c", body)
			}
			if resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
}
