package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// guardCase is one request against a handler with real HTTP in between.
type guardCase struct {
	name    string
	method  string
	path    string
	host    string // Host header; "" keeps the listener's 127.0.0.1:port
	headers map[string]string
	body    string
	want    int
	// wantBody is a substring of the answer.
	wantBody string
	// acts: the request must reach the backend as a command.
	acts bool
}

func runGuardCases(t *testing.T, h *Handler, be *memBackend, tests []guardCase) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(be.lastCommands())
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(got), tt.wantBody) {
				t.Fatalf("%s %s (Host %q, %v) = %d %s, want %d with %q", tt.method, tt.path, tt.host, tt.headers, resp.StatusCode, got, tt.want, tt.wantBody)
			}
			if acted := len(be.lastCommands()) > before; acted != tt.acts {
				t.Fatalf("%s %s: command run = %v, want %v", tt.method, tt.path, acted, tt.acts)
			}
		})
	}
}

const form = "application/x-www-form-urlencoded"

// TestCrossSiteWritesRefused is finding N1: with no token (the default
// loopback setup, or --insecure-api), a page on another origin that
// auto-submits a form to promote?full=true promoted the rollout. The
// first case is the reproduction:
//
//	curl -X POST -H 'Origin: http://evil.example' -H 'Content-Type: application/x-www-form-urlencoded' \
//	  --data x=1 'http://127.0.0.1:8080/api/v1/rollouts/default/web/promote?full=true'
//
// which answered 200.
func TestCrossSiteWritesRefused(t *testing.T) {
	be := newMemBackend(designStatus())
	h, err := New(Options{Backend: be, TrustedOrigins: []string{"https://sluice.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	promote := "/api/v1/rollouts/default/checkout/promote?full=true"
	runGuardCases(t, h, be, []guardCase{
		{name: "N1 form post from another origin", method: "POST", path: promote, body: "x=1",
			headers: map[string]string{"Origin": "http://evil.example", "Content-Type": form},
			want:    403, wantBody: "cross-origin request refused"},
		{name: "cross-site fetch with the client header", method: "POST", path: promote,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site", ClientHeader: "x"}, want: 403, wantBody: "cross-origin"},
		{name: "same-site is not same-origin", method: "POST", path: promote,
			headers: map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost:8080", ClientHeader: "x"}, want: 403},
		{name: "foreign origin with json", method: "POST", path: promote, body: "{}",
			headers: map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, want: 403},
		{name: "form post from the same origin", method: "POST", path: promote, body: "x=1",
			headers: map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": form}, want: 403, wantBody: ClientHeader},
		{name: "text/plain post, no headers of a program", method: "POST", path: promote, body: "x",
			headers: map[string]string{"Content-Type": "text/plain"}, want: 403, wantBody: ClientHeader},
		{name: "bare curl -X POST", method: "POST", path: promote, want: 403, wantBody: "curl -H"},
		{name: "the dashboard: same origin with the header", method: "POST", path: "/api/v1/rollouts/default/checkout/pause",
			headers: map[string]string{"Sec-Fetch-Site": "same-origin", ClientHeader: "dashboard"}, want: 200, acts: true},
		{name: "an old browser: Origin equal to Host", method: "POST", path: "/api/v1/rollouts/default/checkout/resume",
			host: "localhost:8080", headers: map[string]string{"Origin": "http://localhost:8080", ClientHeader: "dashboard"}, want: 200, acts: true},
		{name: "the client commands: no Origin, the header", method: "POST", path: "/api/v1/rollouts/default/checkout/pause",
			headers: map[string]string{ClientHeader: "sluice-cli"}, want: 200, acts: true},
		{name: "a script: json content type", method: "POST", path: "/api/v1/rollouts/default/checkout/resume",
			headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}, body: "{}", want: 200, acts: true},
		{name: "a trusted origin behind a proxy", method: "POST", path: "/api/v1/rollouts/default/checkout/pause",
			headers: map[string]string{"Origin": "https://sluice.example.com", "Sec-Fetch-Site": "cross-site", ClientHeader: "dashboard"}, want: 200, acts: true},
		{name: "reads are not writes", method: "GET", path: "/api/v1/rollouts",
			headers: map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, want: 200},
	})
	if _, err := New(Options{Backend: be, TrustedOrigins: []string{"evil.example"}}); err == nil || !strings.Contains(err.Error(), "--api-trusted-origins") {
		t.Errorf("a trusted origin without scheme: %v, want an error naming --api-trusted-origins", err)
	}
}

// TestForeignHostRefused is finding N2 on the API: a request carrying a
// Host the server does not answer to (DNS rebinding: evil.example made to
// resolve to 127.0.0.1) was served; now it is answered 421, except the
// probes and the webhooks.
func TestForeignHostRefused(t *testing.T) {
	be := newMemBackend(designStatus())
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	h, err := New(Options{Backend: be, Hook: hook, AllowedHosts: []string{"sluice.sluice-system.svc", "*.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	evil := "evil.example:8080"
	cli := map[string]string{ClientHeader: "sluice-cli"}
	runGuardCases(t, h, be, []guardCase{
		{name: "status from a rebound name", method: "GET", path: "/api/v1/rollouts", host: evil, want: 421, wantBody: "--api-allowed-hosts"},
		{name: "event stream from a rebound name", method: "GET", path: "/api/v1/events", host: evil, want: 421},
		{name: "dashboard from a rebound name", method: "GET", path: "/ui/", host: evil, want: 421},
		{name: "metrics from a rebound name", method: "GET", path: "/metrics", host: evil, want: 421},
		{name: "promote from a rebound name", method: "POST", path: "/api/v1/rollouts/default/checkout/promote", host: evil, headers: cli, want: 421},
		{name: "healthz answers any name", method: "GET", path: "/healthz", host: evil, want: 200},
		{name: "readyz answers any name", method: "GET", path: "/readyz", host: evil, want: 200},
		{name: "webhooks come under a proxy's name", method: "POST", path: "/hook/github", host: "hooks.public.example", want: 202},
		{name: "localhost", method: "GET", path: "/api/v1/rollouts", host: "localhost:8080", want: 200},
		{name: "the pod IP", method: "GET", path: "/api/v1/rollouts", host: "10.244.0.12:8080", want: 200},
		{name: "an IPv6 address", method: "GET", path: "/api/v1/rollouts", host: "[fd00::12]:8080", want: 200},
		{name: "the Service name", method: "POST", path: "/api/v1/rollouts/default/checkout/pause", host: "sluice.sluice-system.svc:8080", headers: cli, want: 200, acts: true},
		{name: "a name under a wildcard", method: "GET", path: "/api/v1/rollouts", host: "sluice.example.com", want: 200},
	})
	if _, err := New(Options{Backend: be, AllowedHosts: []string{"https://sluice.example.com"}}); err == nil || !strings.Contains(err.Error(), "--api-allowed-hosts") {
		t.Errorf("an allowed host with a scheme: %v, want an error naming --api-allowed-hosts", err)
	}
}

// TestReadToken is finding N10's first half: with --api-token-file,
// reads (status, events, the event stream) needed no token. With a read
// token they need it, or the write token; the dashboard's cookie counts
// for reads only.
func TestReadToken(t *testing.T) {
	be := newMemBackend(designStatus())
	h, err := New(Options{Backend: be, Token: "wr1te", ReadToken: "re4d"})
	if err != nil {
		t.Fatal(err)
	}
	h.CloseStreams() // an admitted event stream then ends at once
	cookie := func(v string) map[string]string { return map[string]string{"Cookie": TokenCookie + "=" + v} }
	bearer := func(v string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + v, ClientHeader: "x"}
	}
	runGuardCases(t, h, be, []guardCase{
		{name: "list without a token", method: "GET", path: "/api/v1/rollouts", want: 401, wantBody: "read token"},
		{name: "status without a token", method: "GET", path: "/api/v1/rollouts/default/checkout", want: 401},
		{name: "recent events without a token", method: "GET", path: "/api/v1/rollouts/default/checkout/events", want: 401},
		{name: "event stream without a token", method: "GET", path: "/api/v1/events", want: 401},
		{name: "wrong token", method: "GET", path: "/api/v1/rollouts", headers: bearer("nope"), want: 401},
		{name: "read token", method: "GET", path: "/api/v1/rollouts", headers: bearer("re4d"), want: 200, wantBody: "checkout"},
		{name: "write token reads too", method: "GET", path: "/api/v1/rollouts/default/checkout", headers: bearer("wr1te"), want: 200},
		{name: "event stream with the dashboard's cookie", method: "GET", path: "/api/v1/events", headers: cookie("re4d"), want: 200},
		{name: "escaped cookie", method: "GET", path: "/api/v1/rollouts", headers: cookie("wr1%74e"), want: 200},
		{name: "wrong cookie", method: "GET", path: "/api/v1/rollouts", headers: cookie("nope"), want: 401},
		{name: "read token cannot write", method: "POST", path: "/api/v1/rollouts/default/checkout/pause", headers: bearer("re4d"), want: 401},
		{name: "cookie cannot write", method: "POST", path: "/api/v1/rollouts/default/checkout/pause",
			headers: map[string]string{"Cookie": TokenCookie + "=wr1te", ClientHeader: "x"}, want: 401},
		{name: "write token writes", method: "POST", path: "/api/v1/rollouts/default/checkout/pause", headers: bearer("wr1te"), want: 200, acts: true},
		{name: "info stays open", method: "GET", path: "/api/v1/info", want: 200, wantBody: `"readTokenRequired":true`},
		{name: "the page stays open", method: "GET", path: "/ui/", want: 200},
		{name: "healthz stays open", method: "GET", path: "/healthz", want: 200},
	})
	if cmds := be.lastCommands(); cmds[len(cmds)-1] != rollout.CmdPause {
		t.Errorf("last command %v, want pause", be.lastCommands())
	}
	if _, err := New(Options{Backend: be, ReadToken: "re4d"}); err == nil || !strings.Contains(err.Error(), "--api-token-file") {
		t.Errorf("a read token without a write token: %v, want refused", err)
	}
	// Without a read token, reads stay open, as documented.
	open, _ := New(Options{Backend: be, Token: "wr1te"})
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/rollouts", nil))
	var info Info
	rec2 := httptest.NewRecorder()
	open.ServeHTTP(rec2, httptest.NewRequest("GET", "http://localhost/api/v1/info", nil))
	_ = json.Unmarshal(rec2.Body.Bytes(), &info)
	if rec.Code != 200 || info.ReadTokenRequired {
		t.Errorf("no read token: list = %d, info %+v; want open reads", rec.Code, info)
	}
}

// TestEventStreamsPerClient is finding N10's second half: one client
// could open every one of the --http-max-event-streams slots. Now it
// gets MaxEventStreamsPerClient, and another client still gets one.
func TestEventStreamsPerClient(t *testing.T) {
	const perClient = 2
	reg := prometheus.NewRegistry()
	be := newMemBackend()
	h, err := New(Options{Backend: be, Registry: reg, Heartbeat: time.Hour, Limits: Limits{MaxEventStreams: 10, MaxEventStreamsPerClient: perClient}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, h)
	url := "http://" + addr + "/api/v1/events"
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	open := func(c *http.Client) *http.Response {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	greedy := from("127.0.0.1")
	for i := range perClient {
		if resp := open(greedy); resp.StatusCode != 200 {
			t.Fatalf("stream %d of one client = %d, want 200", i+1, resp.StatusCode)
		}
	}
	resp := open(greedy)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "from 127.0.0.1") {
		t.Fatalf("stream %d of one client = %d %s, want 503 naming the client", perClient+1, resp.StatusCode, body)
	}
	if got := refusedCount(t, reg, refusedClientStreamsFull); got != 1 {
		t.Errorf("event-streams-per-client = %v, want 1", got)
	}
	// Another address on the loopback network is another client.
	if resp := open(from("127.0.0.2")); resp.StatusCode != 200 {
		t.Fatalf("another client's stream = %d, want 200 while the first is capped", resp.StatusCode)
	}
}
