package gitwatch

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const hookSecret = "s3cret-hook-key"

func sign(body []byte) string {
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// hookRequest builds a webhook request the way each forge sends it.
func hookRequest(kind, ref string, body []byte, signed bool) *http.Request {
	if body == nil {
		body = []byte(`{"ref":"` + ref + `","after":"0000"}`)
	}
	sig := sign(body)
	token := hookSecret
	if !signed {
		sig = sign([]byte("something else"))
		token = "wrong-token"
	}
	r := httptest.NewRequest(http.MethodPost, "/hook/"+kind, bytes.NewReader(body))
	switch kind {
	case "github":
		r.Header.Set("X-GitHub-Event", "push")
		r.Header.Set("X-Hub-Signature-256", "sha256="+sig)
	case "gitlab":
		r.Header.Set("X-Gitlab-Event", "Push Hook")
		r.Header.Set("X-Gitlab-Token", token)
	case "gitea":
		r.Header.Set("X-Gitea-Event", "push")
		r.Header.Set("X-Gitea-Signature", sig)
	default:
		r.Header.Set("X-Signature", "sha256="+sig)
	}
	return r
}

func hookWatcher(t testing.TB, secret string) *Watcher {
	t.Helper()
	// New does no I/O, so the paths need not exist.
	w, err := New(Options{Repo: "/nonexistent/repo", CacheDir: "/nonexistent/cache", Branch: "main", WebhookSecret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestHookHandler(t *testing.T) {
	big := append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("x"), MaxHookBody)...)
	big = append(big, `"}`...)
	tests := []struct {
		name    string
		secret  string
		req     func() *http.Request
		code    int
		trigger bool
	}{
		{name: "github push to main", req: func() *http.Request { return hookRequest("github", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "gitlab push to main", req: func() *http.Request { return hookRequest("gitlab", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "gitea push to main", req: func() *http.Request { return hookRequest("gitea", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "generic push to main", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "secret file whitespace is trimmed", secret: "  " + hookSecret + "\n", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "github wrong signature", req: func() *http.Request { return hookRequest("github", "refs/heads/main", nil, false) }, code: 401},
		{name: "gitlab wrong token", req: func() *http.Request { return hookRequest("gitlab", "refs/heads/main", nil, false) }, code: 401},
		{name: "gitea wrong signature", req: func() *http.Request { return hookRequest("gitea", "refs/heads/main", nil, false) }, code: 401},
		{name: "generic wrong signature", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, false) }, code: 401},
		{name: "missing signature", req: func() *http.Request {
			r := hookRequest("github", "refs/heads/main", nil, true)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, code: 401},
		{name: "generic signature without sha256= prefix", req: func() *http.Request {
			r := hookRequest("generic", "refs/heads/main", nil, true)
			r.Header.Set("X-Signature", strings.TrimPrefix(r.Header.Get("X-Signature"), "sha256="))
			return r
		}, code: 401},
		{name: "no secret configured rejects everything", secret: " ", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, true) }, code: 401},
		{name: "other branch is accepted and ignored", req: func() *http.Request { return hookRequest("github", "refs/heads/feature", nil, true) }, code: 202},
		{name: "tag push is ignored", req: func() *http.Request { return hookRequest("generic", "refs/tags/v1", nil, true) }, code: 202},
		{name: "github ping is ignored", req: func() *http.Request {
			r := hookRequest("github", "refs/heads/main", nil, true)
			r.Header.Set("X-GitHub-Event", "ping")
			return r
		}, code: 202},
		{name: "signed but not JSON", req: func() *http.Request { return hookRequest("generic", "", []byte("ref=main"), true) }, code: 400},
		{name: "body over 1 MiB", req: func() *http.Request { return hookRequest("generic", "", big, true) }, code: 413},
		{name: "body over 1 MiB without length", req: func() *http.Request {
			r := hookRequest("generic", "", big, true)
			r.ContentLength = -1
			return r
		}, code: 413},
		{name: "unknown type", req: func() *http.Request { return hookRequest("bitbucket", "refs/heads/main", nil, true) }, code: 404},
		{name: "GET is not allowed", req: func() *http.Request { return httptest.NewRequest(http.MethodGet, "/hook/github", nil) }, code: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := tt.secret
			if secret == "" {
				secret = hookSecret
			}
			w := hookWatcher(t, secret)
			rec := httptest.NewRecorder()
			w.Handler().ServeHTTP(rec, tt.req())
			if rec.Code != tt.code {
				t.Errorf("code %d, want %d; body %s", rec.Code, tt.code, rec.Body)
			}
			if got := w.triggers.Load() > 0; got != tt.trigger {
				t.Errorf("triggered %v, want %v", got, tt.trigger)
			}
		})
	}
}

func TestTriggerCoalesces(t *testing.T) {
	w := hookWatcher(t, hookSecret)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			w.Handler().ServeHTTP(rec, hookRequest("github", "refs/heads/main", nil, true))
			if rec.Code != 202 {
				t.Errorf("code %d", rec.Code)
			}
		}()
	}
	wg.Wait()
	if n := w.triggers.Load(); n != 1 {
		t.Errorf("%d fetches pending after 50 hooks, want 1", n)
	}
}

// TestHookFetchesAtOnce runs the whole path: push, webhook over HTTP,
// fetch, Revision, with polling effectively off.
func TestHookFetchesAtOnce(t *testing.T) {
	u := newUpstream(t)
	c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
	u.push()
	opts := testOptions(t, "file://"+u.bare)
	opts.WebhookSecret = []byte(hookSecret)
	h := startWatcher(t, opts)
	if r := h.next(10 * time.Second); r.Commit != c0 {
		t.Fatalf("first revision %s, want %s", r.Commit, c0)
	}
	srv := httptest.NewServer(h.w.Handler())
	t.Cleanup(srv.Close)
	send := func(kind, ref string, signed bool) int {
		t.Helper()
		r := hookRequest(kind, ref, nil, signed)
		req, err := http.NewRequest(http.MethodPost, srv.URL+r.URL.Path, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = r.Header
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, 5*time.Second, "first fetch recorded", func() bool { return fetchCount(t, h.reg, resultOK) == 1 })

	c1 := u.commit("c1", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v2")})
	u.push()
	tests := []struct {
		kind, ref string
		signed    bool
		code      int
	}{
		{"github", "refs/heads/main", false, 401},
		{"gitlab", "refs/heads/main", false, 401},
		{"github", "refs/heads/other", true, 202},
	}
	for _, tt := range tests {
		if code := send(tt.kind, tt.ref, tt.signed); code != tt.code {
			t.Errorf("%s %s signed=%v: code %d, want %d", tt.kind, tt.ref, tt.signed, code, tt.code)
		}
	}
	if n := h.w.triggers.Load(); n != 0 {
		t.Fatalf("rejected or ignored hooks triggered %d fetches", n)
	}
	if n := fetchCount(t, h.reg, resultOK); n != 1 {
		t.Fatalf("%d fetches, want only the first", n)
	}

	start := time.Now()
	if code := send("github", "refs/heads/main", true); code != 202 {
		t.Fatalf("valid hook: code %d", code)
	}
	r := h.next(time.Second)
	if r.Commit != c1 {
		t.Fatalf("revision %s, want %s", r.Commit, c1)
	}
	t.Logf("webhook to revision: %s", time.Since(start))

	// A burst of hooks while nothing changes coalesces into few fetches.
	before := fetchCount(t, h.reg, resultOK)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); send("generic", "refs/heads/main", true) }()
	}
	wg.Wait()
	eventually(t, 5*time.Second, "burst fetched", func() bool { return fetchCount(t, h.reg, resultOK) > before })
	if got := fetchCount(t, h.reg, resultOK) - before; got > 5 {
		t.Errorf("20 concurrent hooks made %d fetches", got)
	}
}

// FuzzHook throws arbitrary requests at the handler: it must never panic,
// never answer 5xx, and never fetch unless the request was validly signed.
func FuzzHook(f *testing.F) {
	signed := []byte(`{"ref":"refs/heads/main"}`)
	f.Add("github", "sha256="+sign(signed), "push", signed)
	f.Add("generic", "sha256="+sign(signed), "", signed)
	f.Add("gitlab", hookSecret, "Push Hook", signed)
	f.Add("gitea", sign(signed), "push", signed)
	f.Add("github", "sha256=00", "push", []byte(`{"ref":1}`))
	f.Add("generic", "", "", []byte{0xff, 0x00})
	f.Add("../x", "sha256=zz", "push", []byte(`[]`))
	f.Fuzz(func(t *testing.T, kind, sig, event string, body []byte) {
		w := hookWatcher(t, hookSecret)
		r := httptest.NewRequest(http.MethodPost, "/hook/x", bytes.NewReader(body))
		r.URL.Path = "/hook/" + kind
		for _, h := range []string{"X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature", "X-Signature"} {
			r.Header.Set(h, sig)
		}
		for _, h := range []string{"X-GitHub-Event", "X-Gitlab-Event", "X-Gitea-Event"} {
			r.Header.Set(h, event)
		}
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, r)
		if rec.Code >= 500 {
			t.Fatalf("code %d", rec.Code)
		}
		if w.triggers.Load() == 0 {
			return
		}
		validSig := checkHMAC(strings.TrimPrefix(sig, "sha256="), body, []byte(hookSecret)) || sig == hookSecret
		if !validSig {
			t.Fatalf("unsigned request (kind %q, sig %q) triggered a fetch", kind, sig)
		}
	})
}
