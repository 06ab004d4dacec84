package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// designStatus is the RolloutStatus example of DESIGN §5.
func designStatus() RolloutStatus {
	var s RolloutStatus
	if err := json.Unmarshal([]byte(designStatusJSON), &s); err != nil {
		panic(err)
	}
	return s
}

const designStatusJSON = `{"namespace": "default", "name": "checkout", "phase": "Paused",
 "message": "step 3/6: pause 30s", "commit": "9f8d111",
 "stableVersion": "shop/checkout:v1", "canaryVersion": "shop/checkout:v2",
 "stepIndex": 2, "stepCount": 6,
 "weights": {"stable": 90, "canary": 10},
 "headerRoutes": [{"name": "testers", "match": [{"headerName": "x-canary", "headerValue": {"exact": "always"}}]}],
 "analysisRuns": [{"name": "success-rate-1", "phase": "Running", "metrics": [{"name": "success-rate", "phase": "Successful", "value": "0.998", "message": ""}]}],
 "aborted": false,
 "errors": []}`

func healthy(ns, name string) RolloutStatus {
	return RolloutStatus{Namespace: ns, Name: name, Phase: rollout.PhaseHealthy, StableVersion: "app:v1", Weights: api.Weights{Stable: 100}}
}

type apiCase struct {
	name     string
	method   string
	path     string
	auth     string
	body     string
	chunked  bool
	wantCode int
	// wantBody is a substring of the answer.
	wantBody string
	wantCmd  *rollout.CommandKind
}

func kind(k rollout.CommandKind) *rollout.CommandKind { return &k }

func TestAPI(t *testing.T) {
	// /metrics serves whatever registry it is given; the daemon's own
	// sluice_rollout_* collector is tested through `sluice run` in
	// e2e/metrics_test.go.
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "httpapi_test_served", Help: "a sample the handler must serve"})
	reg.MustRegister(g)
	g.Set(2)
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "hook "+r.URL.Path)
	})
	big := strings.Repeat("x", 70<<10)

	tests := []apiCase{
		{name: "healthz", method: "GET", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "readyz", method: "GET", path: "/readyz", wantCode: 200, wantBody: "ok"},
		{name: "metrics", method: "GET", path: "/metrics", wantCode: 200, wantBody: "httpapi_test_served 2"},
		{name: "list", method: "GET", path: "/api/v1/rollouts", wantCode: 200, wantBody: `{"items":[{"namespace":"default","name":"checkout"`},
		{name: "get", method: "GET", path: "/api/v1/rollouts/default/checkout", wantCode: 200, wantBody: `"phase":"Paused"`},
		{name: "get unknown", method: "GET", path: "/api/v1/rollouts/default/nope", wantCode: 404, wantBody: `{"error":"rollout default/nope: rollout not found"}`},
		{name: "recent events", method: "GET", path: "/api/v1/rollouts/default/checkout/events", wantCode: 200, wantBody: `{"items":[`},
		{name: "no token", method: "POST", path: "/api/v1/rollouts/default/checkout/promote", wantCode: 401, wantBody: "bearer token"},
		{name: "wrong token", method: "POST", path: "/api/v1/rollouts/default/checkout/promote", auth: "Bearer nope", wantCode: 401},
		{name: "basic auth is not a token", method: "POST", path: "/api/v1/rollouts/default/checkout/abort", auth: "Basic czNjcjN0", wantCode: 401},
		{name: "promote", method: "POST", path: "/api/v1/rollouts/default/checkout/promote", auth: "Bearer s3cr3t", wantCode: 200, wantBody: `"stepIndex":3`, wantCmd: kind(rollout.CmdPromote)},
		{name: "promote full", method: "POST", path: "/api/v1/rollouts/default/checkout/promote?full=true", auth: "bearer s3cr3t", wantCode: 200, wantBody: `"phase":"Healthy"`, wantCmd: kind(rollout.CmdPromoteFull)},
		{name: "promote full=false", method: "POST", path: "/api/v1/rollouts/shop/cart/promote?full=false", auth: "Bearer s3cr3t", wantCode: 200, wantCmd: kind(rollout.CmdPromote)},
		{name: "full on abort", method: "POST", path: "/api/v1/rollouts/shop/cart/abort?full=true", auth: "Bearer s3cr3t", wantCode: 400},
		{name: "full not a bool", method: "POST", path: "/api/v1/rollouts/shop/cart/promote?full=yes-please", auth: "Bearer s3cr3t", wantCode: 400},
		{name: "abort", method: "POST", path: "/api/v1/rollouts/shop/cart/abort", auth: "Bearer s3cr3t", wantCode: 200, wantBody: `"aborted":true`, wantCmd: kind(rollout.CmdAbort)},
		{name: "retry", method: "POST", path: "/api/v1/rollouts/shop/cart/retry", auth: "Bearer s3cr3t", wantCode: 200, wantCmd: kind(rollout.CmdRetry)},
		{name: "approve", method: "POST", path: "/api/v1/rollouts/shop/cart/approve", auth: "Bearer s3cr3t", wantCode: 200, wantCmd: kind(rollout.CmdApprove)},
		{name: "pause", method: "POST", path: "/api/v1/rollouts/shop/cart/pause", auth: "Bearer s3cr3t", wantCode: 200, wantBody: `"phase":"Paused"`, wantCmd: kind(rollout.CmdPause)},
		{name: "resume refused", method: "POST", path: "/api/v1/rollouts/shop/cart/resume", auth: "Bearer s3cr3t", wantCode: 409, wantBody: "not allowed"},
		{name: "unknown command", method: "POST", path: "/api/v1/rollouts/shop/cart/explode", auth: "Bearer s3cr3t", wantCode: 404, wantBody: "unknown command"},
		{name: "command on unknown rollout", method: "POST", path: "/api/v1/rollouts/shop/nope/abort", auth: "Bearer s3cr3t", wantCode: 404},
		{name: "body too large", method: "POST", path: "/api/v1/rollouts/shop/cart/pause", auth: "Bearer s3cr3t", body: big, wantCode: 413},
		{name: "chunked body too large", method: "POST", path: "/api/v1/rollouts/shop/cart/pause", auth: "Bearer s3cr3t", body: big, chunked: true, wantCode: 413},
		{name: "small body ignored", method: "POST", path: "/api/v1/rollouts/shop/cart/pause", auth: "Bearer s3cr3t", body: "{}", wantCode: 200, wantCmd: kind(rollout.CmdPause)},
		{name: "delete list", method: "DELETE", path: "/api/v1/rollouts", wantCode: 405},
		{name: "get a command", method: "GET", path: "/api/v1/rollouts/shop/cart/promote", wantCode: 405},
		{name: "post status", method: "POST", path: "/api/v1/rollouts/shop/cart", wantCode: 405},
		{name: "post healthz", method: "POST", path: "/healthz", wantCode: 405},
		{name: "unknown path", method: "GET", path: "/api/v2/rollouts", wantCode: 404},
		{name: "hook mounted", method: "POST", path: "/hook/github", wantCode: 202, wantBody: "hook /hook/github"},
	}
	be := newMemBackend(designStatus(), healthy("shop", "cart"))
	be.refuse[rollout.CmdResume] = true
	h, err := New(Options{Backend: be, Registry: reg, Token: "s3cr3t", Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(be.lastCommands())
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
				if tt.chunked {
					body = io.MultiReader(body) // hides the length: sent chunked
				}
			}
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			req.Header.Set(ClientHeader, "test") // as the client commands send it (guard_test.go goes without)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, got, tt.wantCode)
			}
			if !strings.Contains(string(got), tt.wantBody) {
				t.Errorf("body %s does not contain %s", got, tt.wantBody)
			}
			if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			// Every JSON answer of the API says so.
			if strings.HasPrefix(string(got), "{") {
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", ct)
				}
			}
			cmds := be.lastCommands()[before:]
			switch {
			case tt.wantCmd == nil && len(cmds) > 0:
				t.Errorf("backend got %v, want no command", cmds)
			case tt.wantCmd != nil && (len(cmds) != 1 || cmds[0] != *tt.wantCmd):
				t.Errorf("backend got %v, want %s", cmds, *tt.wantCmd)
			}
		})
	}
}

func TestWriteCallsOpenWithoutToken(t *testing.T) {
	be := newMemBackend(healthy("default", "a"))
	h, err := New(Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://localhost/api/v1/rollouts/default/a/pause", nil)
	req.Header.Set(ClientHeader, "test")
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("pause without a configured token = %d %s, want 200", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "http://localhost/hook/github", nil))
	if rec.Code != 404 {
		t.Errorf("hook with no hook handler = %d, want 404", rec.Code)
	}
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name     string
		ready    func() error
		wantCode int
		wantBody string
	}{
		{"ready", func() error { return nil }, 200, "ok"},
		{"first sync pending", func() error { return errors.New("first git sync not done") }, 503, "not ready: first git sync not done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(Options{Backend: newMemBackend(), Ready: tt.ready})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/readyz", nil))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("readyz = %d %q, want %d %q", rec.Code, rec.Body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

// TestStatusContract checks the JSON of GET /api/v1/rollouts/{ns}/{name}
// against the example of DESIGN §5 (testdata/status.golden), field names
// and all; and that an empty list is [] rather than null.
func TestStatusContract(t *testing.T) {
	h, err := New(Options{Backend: newMemBackend(designStatus())})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/rollouts/default/checkout", nil))
	var v any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(v, "", "  ")
	testkit.Golden(t, filepath.Join("testdata", "status.golden"), append(got, '\n'))

	var want map[string]any
	_ = json.Unmarshal([]byte(designStatusJSON), &want)
	var have map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &have)
	for k := range want {
		if _, ok := have[k]; !ok {
			t.Errorf("status JSON lacks DESIGN §5 field %q", k)
		}
	}

	h, _ = New(Options{Backend: newMemBackend()})
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/rollouts", nil))
	if strings.TrimSpace(rec.Body.String()) != `{"items":[]}` {
		t.Errorf("empty list = %s, want {\"items\":[]}", rec.Body)
	}
}

func TestListIsSorted(t *testing.T) {
	be := newMemBackend(healthy("b", "x"), healthy("a", "z"), healthy("a", "y"))
	h, _ := New(Options{Backend: be})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/rollouts", nil))
	var l List
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range l.Items {
		keys = append(keys, s.Namespace+"/"+s.Name)
	}
	if !slices.Equal(keys, []string{"a/y", "a/z", "b/x"}) {
		t.Errorf("order = %v", keys)
	}
}
