package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/browsertest"
)

// startPausedWeb runs `sluice run` with flags and one rollout "web" whose
// v2 canary waits at 20 % in a pause until promoted.
func startPausedWeb(t *testing.T, flags ...string) *daemon {
	t.Helper()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	web := rolloutSpec{Name: "web", Host: "web.e2e", Version: v1, Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc},
		Steps: "- setWeight: 20\n- pause: {}\n"}
	repo := newGitRepo(t)
	repo.push("v1", map[string]string{"rollouts/web.yaml": web.yaml()})
	d := startDaemon(t, repo, flags...)
	d.waitStatus("web", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	web.Version = v2
	repo.push("v2", map[string]string{"rollouts/web.yaml": web.yaml()})
	d.waitStatus("web", 30*time.Second, "canary v2 paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.CanaryVersion == v2 && s.Weights.Canary == 20
	})
	return d
}

// TestCrossSiteFormCannotPromote is finding N1 in a real browser: a page
// on another origin (http://localhost:PORT, another site than the API's
// 127.0.0.1) auto-submits a form to promote?full=true against the default
// setup (loopback, no token). Chromium sends it; before the fix sluice
// answered 200 and sent every request to the canary. Now it answers 403
// and the canary stays paused at 20 %. The dashboard on sluice's own
// origin still promotes.
func TestCrossSiteFormCannotPromote(t *testing.T) {
	t.Parallel()
	d := startPausedWeb(t)
	br := browsertest.Start(t, 1024, 768)

	target := d.url + "/api/v1/rollouts/default/web/promote?full=true"
	evil := serveEvilPage(t, fmt.Sprintf(`<!doctype html><title>cute cats</title>
<form method="POST" action=%q enctype="application/x-www-form-urlencoded"><input type="hidden" name="x" value="1"></form>
<script>document.forms[0].submit()</script>`, target))
	br.Do(30*time.Second, "open the page on another origin", chromedp.Navigate(evil))
	// The form's answer replaces the page: wait until the browser is on
	// sluice's URL with the body loaded.
	br.WaitJS(fmt.Sprintf(`location.href === %q && document.readyState === "complete"`, target), 20*time.Second,
		func() string { return "the form was not submitted to sluice" })
	answer := br.Text("body")
	t.Logf("sluice answered the cross-site form: %s", answer)
	br.Screenshot("cross-site-form")

	// Whatever the answer said, what matters is the rollout: give a
	// promote time to act, then look.
	time.Sleep(2 * time.Second)
	st, _ := d.status("web")
	if st.Phase != rollout.PhasePaused || st.Weights.Canary != 20 || st.StableVersion != v1 {
		t.Fatalf("after a cross-site form post: phase %s, stable %s, canary weight %d%% (%q): the form promoted the rollout",
			st.Phase, st.StableVersion, st.Weights.Canary, st.Message)
	}
	if !strings.Contains(answer, "cross-origin request refused") {
		t.Errorf("the form's answer %q does not say it was refused as cross-origin", answer)
	}
	if !strings.Contains(d.log.String(), "cross-origin write refused") {
		t.Error("the refusal is not logged")
	}

	// The dashboard, on sluice's own origin, still promotes.
	br.Do(30*time.Second, "open the dashboard", chromedp.Navigate(d.url+"/ui/#/r/default/web"))
	br.WaitText("#weights", "canary 20%", 20*time.Second)
	br.DoOnRendered(10*time.Second, "press promote", chromedp.Click(chromedp.CSS("#do-promote")))
	br.Dialog(10 * time.Second)
	br.WaitText("#result", "promote: done", 10*time.Second)
	d.waitStatus("web", 30*time.Second, "v2 promoted from the dashboard", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
}

// serveEvilPage serves html at http://localhost:PORT/ until the test
// ends: another origin, and another site, than sluice's 127.0.0.1.
func serveEvilPage(t *testing.T, html string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, html)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("http://localhost:%d/", lis.Addr().(*net.TCPAddr).Port)
}

// TestHostCheckAndPprofOnBinary is finding N2 against the built binary: a
// foreign Host header (DNS rebinding) is refused on the API and on pprof,
// the probes still answer it, and pprof's cmdline does not show the
// secrets given as flags. Before the fix all of it was served as asked.
func TestHostCheckAndPprofOnBinary(t *testing.T) {
	t.Parallel()
	slack := "https://hooks.slack.com/services/T000/B000/s3cretpath"
	hook := "https://alice:pa55w0rd@hooks.example/x"
	repo := newGitRepo(t)
	repo.push("empty", map[string]string{"README.md": "nothing yet\n"})
	d := startDaemon(t, repo, "--debug-addr", "127.0.0.1:0", "--alert-slack", slack, "--alert-webhook", hook)
	d.waitLog(`"msg":"pprof serving"`, 10*time.Second)
	m := regexp.MustCompile(`"msg":"pprof serving","addr":"([^"]+)"`).FindStringSubmatch(d.log.String())
	if m == nil {
		t.Fatalf("no pprof address in the log")
	}
	pprof := "http://" + m[1]
	get := func(url, host string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tt := range []struct {
		url, host string
		want      int
	}{
		{d.url + "/api/v1/rollouts", "evil.example:8080", http.StatusMisdirectedRequest},
		{d.url + "/ui/", "evil.example:8080", http.StatusMisdirectedRequest},
		{d.url + "/healthz", "evil.example:8080", http.StatusOK},
		{d.url + "/api/v1/rollouts", "localhost:8080", http.StatusOK},
		{pprof + "/debug/pprof/cmdline", "evil.example:6060", http.StatusMisdirectedRequest},
		{pprof + "/debug/pprof/heap?debug=1", "evil.example:6060", http.StatusMisdirectedRequest},
		{pprof + "/debug/pprof/heap?debug=1", "", http.StatusOK},
	} {
		if code, body := get(tt.url, tt.host); code != tt.want {
			t.Errorf("GET %s with Host %q = %d %.120q, want %d", tt.url, tt.host, code, body, tt.want)
		}
	}
	code, cmdline := get(pprof+"/debug/pprof/cmdline", "")
	for _, secret := range []string{"s3cretpath", "pa55w0rd", "hooks.slack.com"} {
		if strings.Contains(cmdline, secret) {
			t.Errorf("pprof cmdline shows %q: %q", secret, cmdline)
		}
	}
	if code != http.StatusOK || !strings.Contains(cmdline, "--alert-slack\x00<redacted>") {
		t.Errorf("pprof cmdline = %d %q, want the flag names with redacted values", code, cmdline)
	}
	d.waitLog("deprecated: --alert-slack on the command line", 5*time.Second)
}

// TestReadTokenOnBinary is finding N10 against the built binary: with
// --api-read-token-file, reads and the event stream need a token, and one
// client cannot open more than --http-max-event-streams-per-client
// streams. Before, reads were open and one client could take all 100.
func TestReadTokenOnBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write, read := filepath.Join(dir, "write"), filepath.Join(dir, "read")
	for p, tok := range map[string]string{write: "w-token", read: "r-token"} {
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repo := newGitRepo(t)
	repo.push("empty", map[string]string{"README.md": "nothing yet\n"})
	d := startDaemon(t, repo, "--api-token-file", write, "--api-read-token-file", read, "--http-max-event-streams-per-client", "2")
	do := func(path, token string) *http.Response {
		req, _ := http.NewRequest("GET", d.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, tt := range []struct {
		path, token string
		want        int
	}{
		{"/api/v1/rollouts", "", 401},
		{"/api/v1/events", "", 401},
		{"/api/v1/rollouts", "r-token", 200},
		{"/api/v1/rollouts", "w-token", 200},
		{"/api/v1/info", "", 200},
	} {
		resp := do(tt.path, tt.token)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s with token %q = %d, want %d", tt.path, tt.token, resp.StatusCode, tt.want)
		}
	}
	var info httpapi.Info
	resp := do("/api/v1/info", "")
	_ = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if !info.ReadTokenRequired {
		t.Error("info does not say reads need a token")
	}
	// The client commands send the token on reads.
	if out := d.cli("get", "rollouts", "--token-file", read); strings.Contains(out, "401") {
		t.Errorf("sluice get with the read token: %s", out)
	}
	for i := range 2 {
		s := do("/api/v1/events", "r-token")
		t.Cleanup(func() { s.Body.Close() })
		if s.StatusCode != 200 {
			t.Fatalf("stream %d = %d, want 200", i+1, s.StatusCode)
		}
	}
	third := do("/api/v1/events", "r-token")
	defer third.Body.Close()
	if third.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third stream of one client = %d, want 503 (--http-max-event-streams-per-client 2)", third.StatusCode)
	}
}
